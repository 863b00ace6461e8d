"""The console serves Playwright's trace viewer (issue 39, "Evidence first"): an attempt's
trace, recorded by a real traced context against a stand-in portal and kept as the worker
keeps it, opens in the browser from the job page, as each role, under the viewer's own
Content-Security-Policy and behind sign-in."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import psycopg
import pytest
from consolekit import ROLES, console_env

from portalq.jobs import queue, worker_api
from portalq.portals.flows.browser import BrowserConfig, close_context, new_context
from portalq.scheduler.console.security import CSP
from portalq.scheduler.evidence import evidence_in, kind_of, run_folder
from tests import payloads

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("trace-artifacts")) as found:
        yield found


@pytest.fixture(scope="module")
def job_id(env, browser, standin_server, run) -> int:
    """A job whose first attempt left a real trace: a traced context (the flows' own
    ``new_context``/``close_context``) opens the IRS stand-in and begins an application;
    its evidence folder is recorded as the worker records it (scheduler.evidence)."""
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        jid = queue.enqueue("obtain_ein", "ORD-TRACE-1", payloads.OBTAIN_EIN, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 1, "
                  "last_error = 'stopped for the trace test' WHERE id = %s", (jid,))
    folder = run_folder(env["artifacts"] / str(jid), 1)

    async def record() -> None:
        context = await new_context(browser, BrowserConfig(trace_policy="on"), folder)
        page = await context.new_page()
        await page.goto(standin_server.url("irs") + "/applyein/")
        await page.get_by_role("link", name="Begin Application Now").click()
        await page.wait_for_url("**/applyein/legalStructure")
        assert await close_context(context, failed=True) == folder / "trace.zip"
        files, missing = evidence_in(folder)
        assert not missing
        async with await psycopg.AsyncConnection.connect(env["dsn"], autocommit=True) as c:
            for path in files:
                await worker_api.add_artifact(c, job_id=jid, attempt=1, kind=kind_of(path),
                                              path=str(path))

    run(record())
    return jid


async def open_trace(page: Any, job_id: int) -> tuple[Any, float]:
    """From the job page, follow the trace's viewer link until the viewer lists the
    recorded actions: (the action list, seconds from the click)."""
    await page.goto(f"/jobs/{job_id}")
    link = page.locator(".trace-viewer a")
    href = await link.get_attribute("href")
    assert href is not None and href.startswith("/trace-viewer/index.html?trace=")
    (trace_url,) = parse_qs(urlsplit(href).query)["trace"]
    assert trace_url.startswith("/artifacts/")  # same origin, the artifact's id only
    started = time.perf_counter()
    await link.click()
    actions = page.get_by_test_id("actions-tree")
    await actions.get_by_text("Begin Application Now").first.wait_for()
    return actions, time.perf_counter() - started


def test_a_recorded_trace_opens_in_the_consoles_trace_viewer(env, signin, job_id, run):
    for role in ROLES:   # the trace is evidence like a screenshot: every role sees it
        page = signin(role)
        actions, took = run(open_trace(page, job_id))
        print(f"{role}: the trace's actions listed {took * 1000:.0f} ms after the click")
        text = run(actions.inner_text())
        assert "Navigate" in text and "/irs/applyein/" in text, text
        assert "Click" in text, text
        # an action's DOM snapshot renders (a frame the service worker builds)
        run(actions.get_by_text("Begin Application Now").first.click())
        snapshot = page.frame_locator("iframe.snapshot-visible")
        run(snapshot.get_by_role("link", name="Begin Application Now").wait_for())
        assert page.csp_errors == [], page.csp_errors   # the viewer's own policy suffices
        assert page.url.startswith(env["base"] + "/trace-viewer/")


def test_viewer_and_trace_need_sign_in_and_only_the_viewer_has_its_policy(
        env, signin, job_id, browser, run):
    async def signed_out() -> list[tuple[str, int, str]]:
        ctx = await browser.new_context(base_url=env["base"])
        try:
            out = []
            for path in ("/trace-viewer/index.html", "/trace-viewer/sw.bundle.js",
                         f"/artifacts/{_trace_artifact(env, job_id)}"):
                resp = await ctx.request.get(path, max_redirects=0)
                out.append((path, resp.status, resp.headers.get("location", "")))
            return out
        finally:
            await ctx.close()

    for path, status, location in run(signed_out()):
        assert status == 303 and location.startswith("/login?next="), (path, status)

    page = signin("viewer")
    viewer = run(page.context.request.get("/trace-viewer/index.html"))
    assert viewer.status == 200 and "Playwright Trace Viewer" in run(viewer.text())
    policy = viewer.headers["content-security-policy"]
    assert "worker-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "connect-src 'self';" in policy and "'unsafe-eval'" not in policy
    assert "script-src 'self' 'sha256-" in policy and "unsafe-inline'; img" in policy
    job_page = run(page.context.request.get(f"/jobs/{job_id}"))
    assert job_page.headers["content-security-policy"] == CSP   # unchanged elsewhere

    # signing out unregisters the viewer's service worker, and with it the traces it
    # holds in memory: a snapshot's address then asks for sign-in again
    run(open_trace(page, job_id))
    # the viewer shows a blank data: page in the frame until it has picked an action's
    # snapshot: wait for the snapshot's address (it was read once, and lost that race
    # on a loaded machine)
    where = ("() => { const f = document.querySelector('iframe.snapshot-visible');"
             " try { return f ? f.contentWindow.location.href : ''; } catch (e) { return ''; } }")
    run(page.wait_for_function(f"() => ({where})().includes('/trace-viewer/snapshot/')",
                               timeout=30_000))
    snapshot_url = run(page.evaluate(where))
    assert "/trace-viewer/snapshot/" in snapshot_url
    run(page.goto("/"))
    run(page.click("form.who button[type=submit]"))
    run(page.wait_for_url("**/login?bye=1"))
    assert run(page.evaluate(
        "async () => (await navigator.serviceWorker.getRegistrations()).length")) == 0
    run(page.goto(snapshot_url))
    assert "/login?next=" in page.url


def test_a_link_naming_another_origins_trace_loads_nothing(env, signin, job_id, run):
    """The viewer takes any address in ``?trace=``; a crafted link may name a trace on
    another server (one that even allows every origin to read it). The service worker runs
    under the viewer's policy (``connect-src 'self'``): it never asks that server."""
    zip_path = next(env["artifacts"].rglob("trace.zip"))
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            data = zip_path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/zip")
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        foreign = f"http://127.0.0.1:{other.server_address[1]}/trace.zip"
        page = signin("operator")
        run(page.goto(f"/trace-viewer/index.html?trace={quote(foreign, safe='')}"))
        alert = page.get_by_role("alert")
        run(alert.filter(has_text="Could not load trace").wait_for())
        assert run(page.get_by_test_id("actions-tree").get_by_text(
            "Begin Application Now").count()) == 0
        assert asked == []
        # the same trace from the console itself loads (so the refusal is the origin's)
        run(open_trace(page, job_id))
    finally:
        other.shutdown()
        other.server_close()


def _trace_artifact(env: dict[str, Any], job_id: int) -> int:
    with psycopg.connect(env["dsn"]) as c:
        row = c.execute("SELECT id FROM portalq.job_artifacts WHERE job_id = %s AND "
                        "kind = 'trace'", (job_id,)).fetchone()
    assert row is not None
    return int(row[0])

"""Browser pools through a real `portalq run`: a remote browser server per portal
(`playwright run-server`, two of them), one killed mid-flow -- the attempt is refunded, the
pool reconnects when the server is back, the other endpoint's job never notices; a cap on
concurrent contexts per endpoint; a server of another Playwright release refused with a
clear message (a stand-in server answering as a mismatched run-server answers: HTTP 428
with its version box -- no other Playwright release is installable here)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psycopg
import pytest

from portalq.jobs import queue
from portalq.portals.flows.browser import BrowserUnavailable, BrowserVersionMismatch, load_config
from portalq.portals.flows.remote_browsers import BrowserPool
from tests.plugins import page_job  # noqa: F401 - registers page_job here too
from tests.ports import free_port
from tests.service_helpers import Service, add_local_portal, wait_until

pytestmark = pytest.mark.browser
PLUGINS = "tests.plugins.ledger,tests.plugins.page_job"


class RunServer:
    """`python -m playwright run-server` on a fixed port (so it can come back on it)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    def start(self) -> RunServer:
        # its own session: `python -m playwright` runs a node child (and Chromium under it)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "playwright", "run-server", "--port", str(self.port),
             "--host", "127.0.0.1", "--unsafe"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert self.url.rstrip("/") in line, f"run-server did not start: {line!r}"
        return self

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            if self.proc.stdout:
                self.proc.stdout.close()
            self.proc = None


class SlowSite:
    """A local site whose /hold pages answer only when released (or after ?ms=N)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.hits: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                if url.path != "/hold":   # e.g. the browser's /favicon.ico
                    self.send_error(404)
                    return
                query = parse_qs(url.query)
                with site._lock:
                    site.hits[query.get("job", ["?"])[0]] += 1
                    site.in_flight += 1
                    site.max_in_flight = max(site.max_in_flight, site.in_flight)
                try:
                    if "ms" in query:
                        site.release.wait(int(query["ms"][0]) / 1000)
                    else:
                        site.release.wait(60)
                    body = b"<html><head><title>held page</title></head><body>ok</body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the browser that asked is gone
                finally:
                    with site._lock:
                        site.in_flight -= 1

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, job: str, ms: int | None = None) -> str:
        return f"http://127.0.0.1:{self.port}/hold?job={job}" + (f"&ms={ms}" if ms else "")

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[SlowSite]:
    s = SlowSite()
    yield s
    s.close()


@pytest.fixture
def servers() -> Iterator[list[RunServer]]:
    started = [RunServer().start(), RunServer().start()]
    yield started
    for s in started:
        s.kill()


@pytest.fixture
def browser_config_file(tmp_path: Path) -> Path:
    """playwright.config naming this machine's Chromium: the run-servers launch it."""
    from playwright.sync_api import sync_playwright

    from portalq.portals.flows.browser import resolve_executable

    with sync_playwright() as p:
        executable = resolve_executable(p, load_config()) or p.chromium.executable_path
    path = tmp_path / "playwright.config"
    path.write_text(f'[browser]\nexecutable_path = "{executable}"\n'
                    '[trace]\npolicy = "off"\n')
    return path


def _events(job_id: int) -> list[dict]:
    return queue.show_job(job_id)["events"]


@pytest.mark.e2e
def test_server_killed_mid_flow_refunds_the_attempt_and_the_pool_reconnects(
        db, dsn, tmp_path, site, servers, browser_config_file):
    a, b = servers
    for code in ("alpha", "beta"):
        add_local_portal(dsn, code=code)
    svc = Service(db, tmp_path, "pool", PORTALQ_PLUGINS=PLUGINS, PORTALQ_WORKERS=4,
                  PORTALQ_BROWSER_WS_ALPHA=a.url, PORTALQ_BROWSER_WS_BETA=b.url,
                  PORTALQ_BROWSER_MAX_CONTEXTS=4, PORTALQ_BROWSER_CONNECT_TIMEOUT_SECONDS=10,
                  PORTALQ_PLAYWRIGHT_CONFIG=browser_config_file).start()
    try:
        ja = queue.enqueue("page_job", "A", {"url": site.url("a"), "portal": "alpha"}).id
        jb = queue.enqueue("page_job", "B", {"url": site.url("b"), "portal": "beta"}).id
        wait_until(lambda: site.in_flight == 2, 60, "both pages loading")
        a.kill()                                 # endpoint A dies mid-flow
        wait_until(lambda: queue.get_job(ja)["status"] == "deferred", 30, "job A refunded")
        a.start()                                # A comes back on its port
        site.release.set()                       # B's page answers: B never noticed
        wait_until(lambda: queue.get_job(jb)["status"] == "completed", 30, "job B done")
        wait_until(lambda: queue.get_job(ja)["status"] == "completed", 60, "job A done")
    finally:
        svc.stop()
    job_a, job_b = queue.get_job(ja), queue.get_job(jb)
    assert job_a["attempts"] == 1 and job_b["attempts"] == 1   # the lost attempt refunded
    assert job_a["result"]["title"] == job_b["result"]["title"] == "held page"
    lost = [e for e in _events(ja) if e["to_status"] == "deferred"]
    assert len(lost) == 1 and "browser server lost mid-flow" in lost[0]["error"]
    assert [e["to_status"] for e in _events(jb)] == ["pending", "running", "completed"]
    assert site.hits == {"a": 2, "b": 1}
    log = svc.log()
    assert f"browser server {a.url} was lost; reconnecting" in log
    assert b.url not in log   # the other endpoint was never reconnected


def test_contexts_per_endpoint_are_capped(db, dsn, tmp_path, site, servers,
                                          browser_config_file):
    add_local_portal(dsn, code="beta")
    svc = Service(db, tmp_path, "cap", PORTALQ_PLUGINS=PLUGINS, PORTALQ_WORKERS=4,
                  PORTALQ_BROWSER_WS=servers[1].url, PORTALQ_BROWSER_MAX_CONTEXTS=1,
                  PORTALQ_PLAYWRIGHT_CONFIG=browser_config_file).start()
    try:
        ids = [queue.enqueue("page_job", f"C{i}", {"url": site.url(f"c{i}", ms=400),
                                                   "portal": "beta"}).id for i in range(3)]
        wait_until(lambda: all(queue.get_job(i)["status"] == "completed" for i in ids), 60,
                   "all three pages")
    finally:
        svc.stop()
    assert site.max_in_flight == 1          # four workers, one context at a time
    assert all(queue.get_job(i)["attempts"] == 1 for i in ids)


MISMATCH = ("Playwright version mismatch:\n  - server version: v1.40\n"
            "  - client version: v1.65\n")


@pytest.fixture
def old_server() -> Iterator[str]:
    """Answers a connect as a run-server of Playwright 1.40 answers a newer client."""
    ready = threading.Event()
    state: dict = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 428 Precondition Required\r\n\r\n" + MISMATCH.encode())
            await writer.drain()
        writer.close()

    def serve() -> None:
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
        state.update(loop=loop, server=server, port=server.sockets[0].getsockname()[1])
        ready.set()
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    yield f"ws://127.0.0.1:{state['port']}/"
    state["loop"].call_soon_threadsafe(state["loop"].stop)
    thread.join(10)


def test_a_server_of_another_playwright_release_is_refused(old_server):
    pool = BrowserPool(load_config(), {"*": old_server}, connect_timeout_s=5)

    async def go() -> None:
        try:
            await pool.new_context("any", Path("/tmp"))
        finally:
            await pool.close()

    with pytest.raises(BrowserVersionMismatch) as caught:
        asyncio.run(go())
    message = str(caught.value)
    assert re.search(rf"browser server {re.escape(old_server)} runs Playwright 1\.40, this "
                     r"node runs 1\.\d+ \(1\.\d+\.\d+\)", message), message
    assert "\n" not in message


def test_an_unreachable_server_gives_up_within_the_connect_timeout():
    pool = BrowserPool(load_config(), {"*": f"ws://127.0.0.1:{free_port()}/"},
                       connect_timeout_s=2)

    async def go() -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        try:
            with pytest.raises(BrowserUnavailable):
                await pool.new_context("any", Path("/tmp"))
        finally:
            await pool.close()
        return loop.time() - t0

    assert asyncio.run(go()) < 10


def test_a_mismatched_server_defers_the_job_without_spending_an_attempt(
        db, dsn, tmp_path, old_server, site):
    add_local_portal(dsn, code="gamma")
    svc = Service(db, tmp_path, "old", PORTALQ_PLUGINS=PLUGINS,
                  PORTALQ_BROWSER_WS_GAMMA=old_server).start()
    try:
        job = queue.enqueue("page_job", "G", {"url": site.url("g"), "portal": "gamma"}).id
        wait_until(lambda: queue.get_job(job)["status"] == "deferred", 30, "the job deferred")
    finally:
        svc.stop()
    row = queue.get_job(job)
    assert row["attempts"] == 0
    assert "runs Playwright 1.40, this node runs" in row["last_error"]
    assert site.hits == {}
    with psycopg.connect(dsn) as c:
        streak = c.execute("SELECT outage_streak FROM portalq.portals WHERE code = 'gamma'").fetchone()
    assert streak == (0,)   # not counted against the portal's circuit breaker


def test_closed_contexts_leave_no_listener_on_the_shared_connection(servers,
                                                                    browser_config_file):
    from portalq.portals.flows.browser import close_context

    config = load_config(browser_config_file)
    pool = BrowserPool(config, {"*": servers[0].url}, max_contexts=2, connect_timeout_s=20)

    async def go(tmp: Path) -> tuple[int, int, dict]:
        try:
            first = await pool.new_context("any", tmp)
            # the public Browser wraps a pyee emitter, which can count its listeners
            b = first.browser._impl_obj
            baseline = len(b.listeners("disconnected"))
            await close_context(first)
            for _ in range(5):
                await close_context(await pool.new_context("any", tmp))
            return baseline, len(b.listeners("disconnected")), pool.stats()
        finally:
            await pool.close()

    with tempfile.TemporaryDirectory() as tmp:
        baseline, after, stats = asyncio.run(go(Path(tmp)))
    assert after == baseline - 1        # the first context's listener went with it too
    assert stats == {servers[0].url: {"open_contexts": 0, "connects": 1}}

"""Screenshots of every console page for docs/console/*.png (real Chromium via Playwright).

    .venv/bin/python tools/console_screenshots.py [OUT_DIR]

A scratch embedded PostgreSQL (under the temp dir) with sample jobs of every type, a day of
finished jobs for the chart, a failed EIN job with an uncertain outcome (escalated, with a
screenshot and a trace), a console in a thread of this process, an operator signed in.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from portalq.jobs import clock, queue  # noqa: E402
from portalq.jobs.admin import users as console_users  # noqa: E402
from portalq.scheduler.demo import DEMO_DESIGNEE  # noqa: E402
from tests import payloads  # noqa: E402

# the firm applies for EINs as its clients' designee, as in the demo: the sample obtain_ein
# job names none of its own (portals/irs/payload.py)
for _name, _value in DEMO_DESIGNEE.items():
    os.environ.setdefault(f"PORTALQ_IRS_DESIGNEE_{_name}", _value)

PASSWORD = "screenshot password"
DB = "portalq_console_shots"


def database() -> str:
    from portalq.jobs.db.embedded import EmbeddedPostgres
    from portalq.jobs.db.migrate import upgrade
    from portalq.scheduler.calendar_cache import store_holidays

    pg = EmbeddedPostgres(Path(tempfile.gettempdir()) / "portalq-console-shots")
    pg.ensure_running()
    pg.recreate_database(DB)
    dsn = pg.dsn(DB)
    url = dsn.replace("postgresql://", "postgresql+psycopg://", 1)
    upgrade(url)
    store_holidays(url)
    return dsn


async def evidence(folder: Path) -> Path:
    from playwright.async_api import async_playwright

    from portalq.portals.flows.browser import launch, load_config

    folder.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as pw:
        browser = await launch(pw, load_config())
        page = await browser.new_page(viewport={"width": 800, "height": 500})
        await page.set_content("""<body style="font-family:sans-serif;margin:0">
          <div style="background:#003366;color:#fff;padding:14px 20px;font-size:20px">
          EIN Assistant (stand-in)</div><div style="padding:20px"><h2>Review and submit</h2>
          <p>Legal name: Widgets LLC</p><p>Responsible party: Ada Lovelace, SSN ***-**-****</p>
          <p style="color:#b00">The system is not responding. Your request may or may not have
          been received. Do not submit again.</p></div></body>""")
        shot = folder / "after-submit.png"
        await page.screenshot(path=str(shot))
        await browser.close()
    return shot


def seed(dsn: str, artifacts: Path) -> dict[str, int]:
    ids: dict[str, int] = {}
    now = clock.now()
    with psycopg.connect(dsn, autocommit=True) as c:
        console_users.add_user(c, "olivia", "operator", PASSWORD)
        console_users.add_user(c, "victor", "viewer", PASSWORD)
        c.execute("""
            INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                   attempts, created_at, updated_at, finished_at, last_error)
            SELECT 'name_search', 'ORD-' || (2000 + g), 'bc_corporate_online',
                   '{"names": ["Sample Name Ltd."]}', s, %(now)s, 1,
                   %(now)s - (1701 - g) * interval '50 seconds', %(now)s,
                   %(now)s - (1701 - g) * interval '50 seconds',
                   CASE WHEN s = 'failed' THEN 'name rejected by examiner' END
            FROM generate_series(1, 1700) g,
                 LATERAL (SELECT CASE WHEN g %% 23 = 0 THEN 'failed' ELSE 'completed' END AS s) x
        """, {"now": now})
        for job_type, payload in payloads.ALL.items():
            ids[job_type] = queue.enqueue(job_type, f"ORD-{job_type.upper()}", payload, conn=c).id
        ids["de"] = queue.enqueue("file_entity", "ORD-DE-7", payloads.FILE_ENTITY_DE, conn=c).id
        c.execute("""UPDATE portalq.job_queue SET status = 'failed', attempts = 1, finished_at = %s,
                       checkpoint = '{"stage": "submitting", "step": "submit", "identity": "ok"}',
                       last_error = 'uncertain: no confirmation page after submit'
                     WHERE id = %s""", (now, ids["obtain_ein"]))
        c.execute("""INSERT INTO portalq.job_events
                         (job_id, at, attempt, from_status, to_status, worker)
                     VALUES (%s, %s, 1, 'pending', 'running', 'node-a:4242'),
                            (%s, %s, 1, 'running', 'failed', 'node-a:4242')""",
                  (ids["obtain_ein"], now - timedelta(minutes=3), ids["obtain_ein"], now))
        c.execute("""UPDATE portalq.job_queue SET status = 'running', attempts = 1, started_at = %s,
                       heartbeat_at = %s, lock_owner = 'node-a:4242',
                       checkpoint = '{"step": "registered office"}' WHERE id = %s""",
                  (now - timedelta(seconds=40), now, ids["file_entity"]))
        c.execute("UPDATE portalq.job_queue SET status = 'deferred', run_at = %s WHERE id = %s",
                  (now + timedelta(hours=9), ids["de"]))
        queue.escalate(c, ids["obtain_ein"], 1, "uncertain", "the portal may have accepted it")
        folder = artifacts / str(ids["obtain_ein"]) / "attempt-1"
        shot = asyncio.run(evidence(folder))
        trace = folder / "trace.zip"
        with zipfile.ZipFile(trace, "w") as z:
            z.writestr("trace.trace", json.dumps({"type": "context-options"}))
        for path, kind in ((shot, "screenshot"), (trace, "trace")):
            c.execute("""INSERT INTO portalq.job_artifacts (job_id, attempt, kind, path, created_at)
                         VALUES (%s, 1, %s, %s, %s)""", (ids["obtain_ein"], kind, str(path), now))
        c.execute("""INSERT INTO portalq.job_documents
                         (job_id, name, content_type, data, created_at)
                     VALUES (%s, 'CP575.pdf', 'application/pdf', %s, %s)""",
                  (ids["obtain_ein"], b"%PDF-1.4", now))
        queue.pause_portal("crtc", reason="CRTC announced maintenance", conn=c)
    return ids


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "console")
    out.mkdir(parents=True, exist_ok=True)
    dsn = database()
    artifacts = Path(tempfile.mkdtemp(prefix="portalq-shots-"))
    ids = seed(dsn, artifacts)
    serve_console(dsn, lambda base: shoot(base, ids, out), artifacts=artifacts)
    sso_login(dsn, out)


def serve_console(dsn: str, work: Callable[[str], Coroutine[Any, Any, None]], *,
                  artifacts: Path | None = None, **console: Any) -> None:
    """Run ``work(base_url)`` against a console on a free local port, served from a thread
    of this process (``console``: more console settings, e.g. single sign-on)."""
    from portalq.scheduler.config import Settings
    from portalq.scheduler.console.app import create_app, server
    from portalq.scheduler.console.signing_key import ConsoleSettings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    settings = Settings(console_url=base, artifacts_dir=artifacts)
    app = create_app(dsn, ConsoleSettings(port=port, secret="screenshots-" + "z" * 20,
                                          **console), settings)
    serving(server(app, "127.0.0.1", port), work(base))


async def signed_in(browser: Any, base: str, sizes: tuple[tuple[int, int], ...] = (
        (1440, 900), (390, 844))) -> AsyncIterator[tuple[int, Any]]:
    """(width, page) for each viewport size: a fresh context signed in as the operator
    (closed when the next size is asked for)."""
    for width, height in sizes:
        ctx = await browser.new_context(base_url=base, timezone_id="America/Vancouver",
                                        viewport={"width": width, "height": height})
        page = await ctx.new_page()
        await page.goto("/login")
        await page.fill("input[name=name]", "olivia")
        await page.fill("input[name=password]", PASSWORD)
        await page.click("button[type=submit]")
        await page.wait_for_url(base + "/")
        yield width, page
        await ctx.close()


def serving(srv: Any, work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` while the console server ``srv`` serves from a thread."""
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    try:
        asyncio.run(work)
    finally:
        srv.should_exit = True
        thread.join(10)


def sso_login(dsn: str, out: Path) -> None:
    """The sign-in page with single sign-on configured (login-sso.png): the page itself
    needs no provider, so an example issuer does."""
    async def shot(base: str) -> None:
        from playwright.async_api import async_playwright

        from portalq.portals.flows.browser import launch, load_config

        async with async_playwright() as pw:
            browser = await launch(pw, load_config())
            page = await browser.new_page(viewport={"width": 1280, "height": 860})
            await page.goto(f"{base}/login")
            await page.screenshot(path=str(out / "login-sso.png"))
            await browser.close()

    serve_console(dsn, shot, oidc_issuer="https://sso.example.com/realms/corp",
                  oidc_client_id="portalq-console", oidc_client_secret="example",
                  oidc_admins="portalq-admins", oidc_label="Example SSO")


async def shoot(base: str, ids: dict[str, int], out: Path) -> None:
    from playwright.async_api import async_playwright

    from portalq.portals.flows.browser import launch, load_config

    async with async_playwright() as pw:
        browser = await launch(pw, load_config())
        ctx = await browser.new_context(base_url=base, viewport={"width": 1280, "height": 860})
        page = await ctx.new_page()
        await page.goto("/login")
        await page.screenshot(path=str(out / "login.png"))
        await page.fill("input[name=name]", "olivia")
        await page.fill("input[name=password]", PASSWORD)
        await page.click("button[type=submit]")
        await page.wait_for_url(base + "/")
        ein = ids["obtain_ein"]
        for name, path in (("overview", "/"), ("jobs", "/jobs"),
                           ("jobs-filtered", "/jobs?status=failed&job_type=name_search"),
                           ("job", f"/jobs/{ein}"), ("job-edit", f"/jobs/{ein}/edit"),
                           ("escalations", "/escalations"), ("portals", "/portals")):
            await page.goto(path)
            await page.screenshot(path=str(out / f"{name}.png"), full_page=True)
        # a bulk preview, an action, then the audit log
        await page.goto("/jobs?status=failed&job_type=name_search")
        await page.check("input[name=scope][value=filter]")
        await page.fill("#bulk input[name=reason]", "examiner backlog cleared")
        await page.click("#bulk button[type=submit]")
        await page.screenshot(path=str(out / "bulk-preview.png"), full_page=True)
        await page.goto(f"/jobs/{ids['name_search']}")
        await page.fill("form[action$='/cancel'] input[name=reason]", "customer withdrew")
        await page.click("form[action$='/cancel'] button")
        await page.goto("/portals")
        await page.fill("tr[data-portal=crtc] form[action$=resume] input[name=reason]",
                        "maintenance over")
        await page.click("tr[data-portal=crtc] form[action$=resume] button")
        await page.goto("/audit")
        await page.screenshot(path=str(out / "audit.png"), full_page=True)
        await browser.close()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()

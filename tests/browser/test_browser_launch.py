"""A browser killed while it is being launched is not the job's fault (issue 48, item 20):
the attempt is refunded as for a browser killed mid-flow. A Chromium that cannot start
at all (it exits with an error code every time) still spends attempts, so a broken
install ends in an escalation instead of a job waiting forever.

The worker runs in this process against the real database; its Chromium is launched
through a wrapper script that kills itself (SIGKILL) or exits 1 on its first launch and
execs this machine's Chromium after that."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path
from typing import Any

import pytest

from portalq.jobs import queue, worker_api
from portalq.jobs.worker_api import Capacity
from portalq.scheduler.config import Settings
from portalq.scheduler.worker import Worker, make_pool
from tests.plugins import page_job  # noqa: F401 - registers page_job
from tests.service_helpers import add_local_portal

pytestmark = pytest.mark.browser


def _chromium() -> str:
    from playwright.sync_api import sync_playwright

    from portalq.portals.flows.browser import load_config, resolve_executable

    with sync_playwright() as p:
        return resolve_executable(p, load_config()) or p.chromium.executable_path


def _wrapped_browser(tmp_path: Path, first_launch: str) -> Path:
    """A playwright.config whose Chromium runs ``first_launch`` (shell) the first time."""
    marker = tmp_path / "launched-once"
    script = tmp_path / "chromium-wrapper.sh"
    script.write_text(f'#!/bin/sh\nif [ ! -e "{marker}" ]; then\n  touch "{marker}"\n'
                      f'  {first_launch}\nfi\nexec "{_chromium()}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    config = tmp_path / "playwright.config"
    config.write_text(f'[browser]\nexecutable_path = "{script}"\n[trace]\npolicy = "off"\n')
    return config


def _run_once(db: str, dsn: str, tmp_path: Path) -> dict[str, Any]:
    """Claim the one job, run it in a worker, return its row as the run left it."""
    async def go() -> int:
        settings = Settings(database_url=db, workers=1, heartbeat_seconds=3600,
                            artifacts_dir=tmp_path / "artifacts", node_id="w1")
        pool = make_pool(settings, dsn)
        await pool.open(wait=True)
        worker = Worker(settings, pool, dsn)
        try:
            await worker.refresh_portals()
            async with pool.connection() as c:
                [claimed] = await worker_api.claim(c, worker="w1", limit=1,
                                                   capacities=[Capacity("local", None)])
            await worker._execute(claimed)
            return int(claimed["id"])
        finally:
            await worker.close_browser()
            await pool.close()

    return dict(queue.get_job(asyncio.run(go())))


def test_a_browser_killed_while_it_is_launched_refunds_the_attempt(
        db, dsn, tmp_path, monkeypatch):
    monkeypatch.setenv("PORTALQ_PLAYWRIGHT_CONFIG",
                       str(_wrapped_browser(tmp_path, 'kill -9 $$')))
    add_local_portal(dsn)
    job = queue.enqueue("page_job", "L1", {"url": "about:blank"}).id
    row = _run_once(db, dsn, tmp_path)
    assert row["id"] == job
    assert row["status"] == "deferred" and row["attempts"] == 0   # refunded
    assert "browser killed while it was being launched" in row["last_error"]
    assert "TargetClosedError" not in row["last_error"]


def test_a_browser_that_cannot_start_spends_the_attempt(db, dsn, tmp_path, monkeypatch):
    monkeypatch.setenv("PORTALQ_PLAYWRIGHT_CONFIG", str(_wrapped_browser(tmp_path, 'exit 1')))
    add_local_portal(dsn)
    queue.enqueue("page_job", "L2", {"url": "about:blank"})
    row = _run_once(db, dsn, tmp_path)
    assert row["status"] == "pending" and row["attempts"] == 1   # a plain retry
    assert "TargetClosedError" in row["last_error"]

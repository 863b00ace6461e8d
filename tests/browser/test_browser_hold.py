"""A flow stopped on a page it does not know keeps its browser for a person (issue 51):
the job shows "a person can take over", an operator takes the page over in the console,
works on it and hands it back; or the hold expires. The real parts: a JobContext on the
database, the flow toolkit's browser_page, the live view, the console, Chromium."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from consolekit import console_env, sign_in_page

from portalq.jobs import queue, worker_api
from portalq.jobs.errors import PortalChanged
from portalq.jobs.worker_api import Capacity
from portalq.portals.flows.base import browser_page
from portalq.portals.flows.browser import new_context
from portalq.scheduler.config import Settings
from portalq.scheduler.job_context import JobContext
from portalq.scheduler.node_db import make_pool
from tests.service_helpers import add_local_portal

pytestmark = pytest.mark.browser

CHANGED = """<!doctype html><html><body style="font: 22px sans-serif; margin: 20px">
  <h1>A new page the flow has never seen</h1>
  <p>Confirm your e-mail: <input id="mail" name="confirm_mail"></p></body></html>"""


def _ledger_portal(dsn: str, _artifacts: Any) -> dict[str, Any]:
    import tests.plugins.ledger  # noqa: F401 - registers ledger_job

    add_local_portal(dsn)
    return {}


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("hold"), _ledger_portal) as found:
        yield found


async def _held_flow(env: dict[str, Any], browser: Any, browser_config: Any, folder: Path,
                     person: Any = None, **settings: Any) -> tuple[int, str]:
    """Claim a job, run a flow that meets CHANGED in a JobContext; ``person(job_id)``
    runs meanwhile. The job's id and the stop's message."""
    job = queue.enqueue("ledger_job", f"O-{time.time_ns()}", {"fail_times": 0}).id
    config = Settings(database_url=env["url"], node_id="w1", **settings)
    pool = make_pool(config, env["dsn"])
    await pool.open(wait=True)

    async def opener(portal: str, artifacts: Path) -> Any:
        return await new_context(browser, browser_config, artifacts,
                                 viewport={"width": 800, "height": 400})
    try:
        async with pool.connection() as c:
            claimed = [j for j in await worker_api.claim(
                c, worker="w1", limit=5, capacities=[Capacity("local", None)])
                if j["id"] == job]
        ctx = JobContext(claimed[0], folder, pool=pool, node="w1", settings=config,
                         browsers=opener)

        async def flow() -> None:
            async with browser_page(ctx) as (page, _evidence):
                await page.set_content(CHANGED)
                raise PortalChanged("no known next state after Continue: portal changed?",
                                    where="after the review page")

        running = asyncio.ensure_future(flow())
        helper = asyncio.ensure_future(person(job)) if person else None
        with pytest.raises(PortalChanged) as stop:
            await running
        if helper:
            await helper
        # the browser closed: its live page goes (the close event's handler, soon after)
        deadline = time.monotonic() + 10
        while True:
            async with pool.connection() as c:
                cur = await c.execute("SELECT count(*) FROM portalq.live_frames "
                                      "WHERE job_id = %s", (job,))
                if (await cur.fetchone()) == (0,):
                    break
            assert time.monotonic() < deadline, "the live page outlived the browser"
            await asyncio.sleep(0.02)
        return job, str(stop.value)
    finally:
        await pool.close()


def _audit(dsn: str, job: int) -> list[tuple[str, str, str]]:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT actor, action, reason FROM portalq.audit_log WHERE target = %s "
                         "ORDER BY id", (f"job:{job}",)).fetchall()


def _step(dsn: str, job: int) -> str:
    with psycopg.connect(dsn) as c:
        return str(c.execute("SELECT checkpoint->>'step' FROM portalq.job_queue WHERE id = %s",
                             (job,)).fetchone()[0])


def test_an_operator_takes_over_the_stopped_page_and_hands_it_back(env, browser,
                                                                   browser_config, run,
                                                                   tmp_path):
    contexts: list[Any] = []
    typed: list[str] = []

    async def person(job: int) -> None:
        deadline = time.monotonic() + 20
        while not _step(env["dsn"], job).startswith("held: a person can take over"):
            assert time.monotonic() < deadline, _step(env["dsn"], job)
            await asyncio.sleep(0.05)
        page = await sign_in_page(browser, env["base"], "operator", contexts)
        await page.goto(f"/jobs/{job}")
        assert "a person can take over until" in await page.locator("#held").inner_text()
        await page.fill("#take-over input[name=reason]", "the portal shows a new page")
        await page.click("#take-over button")
        while await page.locator("#live-frame").get_attribute("data-holding") != "1":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        canvas = await page.locator("#live-frame").bounding_box()
        await page.mouse.click(canvas["x"] + 330 * canvas["width"] / 800,
                               canvas["y"] + 112 * canvas["width"] / 800)
        await page.keyboard.type("ada@example.com")
        while await page.locator("#live-frame").get_attribute("data-last-input") is None:
            await asyncio.sleep(0.02)
        typed.append("ada@example.com")
        await page.fill("#hand-back input[name=reason]", "confirmed the e-mail")
        await page.click("#hand-back button")

    try:
        job, message = run(_held_flow(env, browser, browser_config, tmp_path, person,
                                      browser_hold_seconds=60))
    finally:
        for ctx in contexts:
            run(ctx.close())
    assert "held for a person: handed back by operator" in message
    actions = [(actor, action) for actor, action, _ in _audit(env["dsn"], job)]
    assert actions[0] == ("portalq", "hold the browser")
    assert ("operator", "take over the page") in actions
    assert ("operator", "page input") in actions
    assert actions[-2:] == [("operator", "hand the page back"),
                            ("portalq", "release the browser")]
    assert not any(typed[0] in reason for _, _, reason in _audit(env["dsn"], job))


def test_a_hold_nobody_takes_expires_and_the_evidence_is_kept(env, browser, browser_config,
                                                              run, tmp_path):
    started = time.monotonic()
    job, message = run(_held_flow(env, browser, browser_config, tmp_path,
                                  browser_hold_seconds=1.5))
    assert time.monotonic() - started >= 1.5
    assert "held for a person: expired" in message
    assert (tmp_path / "aria-page.yaml").exists()   # the drift stop's evidence
    assert list(tmp_path.glob("*failure*.png"))
    assert [a for _, a, _ in _audit(env["dsn"], job)] == ["hold the browser",
                                                          "release the browser"]


def test_a_node_holds_no_more_browsers_than_allowed(env, browser, browser_config, run,
                                                    tmp_path):
    job, message = run(_held_flow(env, browser, browser_config, tmp_path,
                                  browser_hold_seconds=60, held_browsers=0))
    assert "not held (this node already holds 0 browsers)" in message
    assert _audit(env["dsn"], job) == []

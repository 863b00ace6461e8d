"""The live view, end to end but for the service: a browser context screencast by the
worker's own code (scheduler/live_frames.py) into the database, the console's stream, and
the job page drawing the frames. Operators and admins see it, a viewer does not; a frame's
latency (Chromium taking it to the console page drawing it) is measured."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from consolekit import assert_no_ssn, console_env, sign_in_page
from flowkit import SSN

from portalq.jobs import queue
from portalq.jobs.db.pool import make_pool
from portalq.scheduler import live_frames
from tests import payloads

pytestmark = pytest.mark.browser

STANDIN = """<!doctype html><html><body style="font: 22px sans-serif; margin: 20px">
  <h1>EIN assistant</h1><p>SSN: <input id="ssn" name="taxpayer_id"></p>
  <p id="step">step 0</p></body></html>"""


def _running_ein(dsn: str, _artifacts: Any) -> dict[str, Any]:
    """An EIN job, running (its page is what the live view casts)."""
    with psycopg.connect(dsn, autocommit=True) as c:
        job = queue.enqueue("obtain_ein", "ORD-LIVE-1", payloads.OBTAIN_EIN, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'running', attempts = 1 "
                  "WHERE id = %s", (job,))
    return {"job": job}


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("live"), _running_ein) as found:
        yield found


async def _attr(page: Any, name: str, ok: Any, timeout: float = 15.0) -> str:
    """The live canvas's attribute ``name`` once ``ok(value)`` (the console's policy forbids
    the string evaluation wait_for_function uses)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await page.locator("#live-frame").get_attribute(name)
        if value is not None and ok(value):
            return str(value)
        assert time.monotonic() < deadline, f"live view: {name}={value!r}"
        await asyncio.sleep(0.01)


def test_an_operator_watches_the_page_change_and_a_viewer_cannot(env, browser, run):
    job = env["job"]
    pool = make_pool(env["dsn"], max_size=4, options={}, reconnect_cap=1.0)

    contexts: list[Any] = []

    async def scenario() -> list[int]:
        await pool.open(wait=True)
        flow = await browser.new_context(viewport={"width": 800, "height": 400})
        try:
            await live_frames.cast(flow, job, [SSN], pool)   # what the worker does
            page = await flow.new_page()
            await page.set_content(STANDIN)
            await page.fill("#ssn", SSN)
            # nobody watches yet: no DevTools session casts the page, nothing is written
            cast = live_frames.casting(job)
            assert cast is not None and cast.session is None and cast.published == 0
            async with pool.connection() as c:
                cur = await c.execute("SELECT count(*) FROM portalq.live_frames")
                assert await cur.fetchone() == (0,)

            console = await sign_in_page(browser, env["base"], "operator", contexts)
            await console.goto(f"/jobs/{job}")
            seq = int(await _attr(console, "data-seq", str.isdigit))
            for step in range(1, 21):   # the flow moves on: each change is seen
                await page.evaluate("n => document.getElementById('step').textContent = "
                                    "'step ' + n", step)
                seq = int(await _attr(console, "data-seq", lambda v, s=seq: int(v) > s))
            assert not console.csp_errors
            # the frames the console holds never show the SSN: the database's copy is the
            # one the worker wrote (masked in its page, tests/browser/test_live_view.py)
            latencies = [int(v) for v in (await console.locator("#live-frame")
                                          .get_attribute("data-latencies")).split(",")]

            viewer = await sign_in_page(browser, env["base"], "viewer", contexts)
            await viewer.goto(f"/jobs/{job}")
            assert await viewer.locator("#live-frame").count() == 0
            status = await viewer.evaluate(
                "u => fetch(u).then(r => r.status)", f"/jobs/{job}/live")
            assert status == 403

            await flow.close()   # the job's browser closes: the page says so
            await _attr(console, "data-ended", lambda v: v == "1")
            return latencies
        finally:
            for ctx in contexts:
                await ctx.close()
            await pool.close()

    latencies = run(scenario())
    with psycopg.connect(env["dsn"]) as c:
        assert c.execute("SELECT count(*) FROM portalq.live_frames").fetchone() == (0,)
    print(f"\nlive view frame latency over {len(latencies)} frames: median "
          f"{statistics.median(latencies)} ms, max {max(latencies)} ms")
    assert statistics.median(latencies) < 2000


POST_INPUT = """async ([url, event]) => {
  const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken='));
  const r = await fetch(url, {method: 'POST', body: JSON.stringify(event),
    headers: {'content-type': 'application/json', 'x-csrftoken': token.slice(10)}});
  return [r.status, await r.text()];
}"""


def test_an_operator_takes_the_page_over_alone_and_every_action_is_audited(env, browser, run):
    job = env["job"]
    pool = make_pool(env["dsn"], max_size=4, options={}, reconnect_cap=1.0)
    contexts: list[Any] = []

    async def scenario() -> None:
        await pool.open(wait=True)
        flow = await browser.new_context(viewport={"width": 800, "height": 400})
        try:
            await live_frames.cast(flow, job, [SSN], pool)
            page = await flow.new_page()
            await page.set_content(STANDIN.replace('name="taxpayer_id"',
                                                   'name="taxpayer_id" id="name-box"'))
            holder = await sign_in_page(browser, env["base"], "operator", contexts)
            await holder.goto(f"/jobs/{job}")
            await _attr(holder, "data-seq", str.isdigit)
            await holder.fill("#take-over input[name=reason]", "the flow stopped on a new page")
            await holder.click("#take-over button")
            await _attr(holder, "data-holding", lambda v: v == "1")

            # a click where the stand-in's input is, then keys: they reach the job's page
            box = await page.locator("#ssn").bounding_box()
            canvas = await holder.locator("#live-frame").bounding_box()
            scale = canvas["width"] / 800
            await holder.mouse.click(canvas["x"] + (box["x"] + 10) * scale,
                                     canvas["y"] + (box["y"] + box["height"] / 2) * scale)
            await holder.keyboard.type("Ada")
            await holder.keyboard.press("Backspace")
            deadline = time.monotonic() + 15
            while await page.locator("#ssn").input_value() != "Ad":
                assert time.monotonic() < deadline, await page.locator("#ssn").input_value()
                await asyncio.sleep(0.02)

            # nobody else's input: a second operator (here an admin) and a viewer
            other = await sign_in_page(browser, env["base"], "admin", contexts)
            await other.goto(f"/jobs/{job}")
            await other.fill("#take-over input[name=reason]", "me too")
            await other.click("#take-over button")
            assert "operator holds this page" in await other.locator("main").inner_text()
            url = f"/jobs/{job}/live/input"
            status, text = await other.evaluate(POST_INPUT, [url, {"kind": "text", "text": "x"}])
            assert (status, "do not hold" in text) == (403, True)
            viewer = await sign_in_page(browser, env["base"], "viewer", contexts)
            status, text = await viewer.evaluate(POST_INPUT, [url, {"kind": "text", "text": "x"}])
            assert (status, "operator role" in text) == (403, True)
            assert await page.locator("#ssn").input_value() == "Ad"
            # the holder's own events are checked too: a made-up key or mouse event is
            # refused, so no text of the sender's choosing reaches the audit log
            for made_up in ({"kind": "key", "key": SSN},
                            {"kind": "mouse", "type": SSN, "x": 1, "y": 1}):
                status, _ = await holder.evaluate(POST_INPUT, [url, made_up])
                assert status == 400

            await holder.fill("#hand-back input[name=reason]", "typed the name")
            await holder.click("#hand-back button")
            await _attr(holder, "data-holding", lambda v: v == "0")
            status, _ = await holder.evaluate(POST_INPUT, [url, {"kind": "text", "text": "x"}])
            assert status == 403   # handed back: the holder's input is refused too
        finally:
            for ctx in contexts:
                await ctx.close()
            await flow.close()
            await pool.close()

    run(scenario())
    with psycopg.connect(env["dsn"]) as c:
        rows = c.execute("SELECT actor, action, reason FROM portalq.audit_log "
                         "WHERE target = %s ORDER BY id", (f"job:{job}",)).fetchall()
    actions = [(a, b) for a, b, _ in rows]
    assert actions[0] == ("operator", "take over the page")
    assert actions[-1] == ("operator", "hand the page back")
    inputs = [r for a, b, r in rows if b == "page input"]
    assert [r for r in inputs if r.startswith("mouse")] and \
        sum(r.startswith("typed 1 character") for r in inputs) == 3
    assert "pressed Backspace" in inputs
    assert all(a == "operator" for a, _ in actions)   # the refused left nothing
    assert not any("Ada" in r or "A" == r for _, _, r in rows)
    assert_no_ssn(repr(rows), "the audit log")

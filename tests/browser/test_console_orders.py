"""The console's order page (issue 36): every job of an order with its status, its result
and its timeline, for a viewer too, nothing secret on it; an order id with a ``/``, spaces
and markup in it reached from the jobs list and from a job's page, shown as text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from consolekit import PASSWORD, assert_no_ssn, console_env
from flowkit import SSN

from portalq.jobs import clock, queue
from tests import payloads

pytestmark = pytest.mark.browser

HOSTILE = "ORD/7 a b <script>window.pwned=1</script>"


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("orders-artifacts")) as env:
        yield env


def _seed(dsn: str) -> dict[str, int]:
    """The hostile order: an EIN job that failed with the SSN in its error and in its
    timeline, a name search completed with a result; and a job of another order."""
    with psycopg.connect(dsn, autocommit=True) as c:
        ein = queue.enqueue("obtain_ein", HOSTILE, payloads.OBTAIN_EIN, conn=c).id
        name = queue.enqueue("name_search", HOSTILE, payloads.NAME_SEARCH, conn=c).id
        other = queue.enqueue("name_search", "ORD-OTHER", payloads.NAME_SEARCH, conn=c).id
        now = clock.now()
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 1, "
                  "finished_at = %s, last_error = %s WHERE id = %s",
                  (now, f"portal refused SSN {SSN}", ein))
        c.execute("INSERT INTO portalq.job_events (job_id, at, attempt, from_status, "
                  "to_status, error, worker) VALUES (%s, %s, 1, 'running', 'failed', %s, "
                  "'w1')", (ein, now, f"refused: {SSN.replace('-', '')}"))
        c.execute("UPDATE portalq.job_queue SET status = 'completed', attempts = 1, "
                  "finished_at = %s, result = %s WHERE id = %s",
                  (now, json.dumps({"available": True, "reference": "NR-4411"}), name))
        queue.escalate(c, ein, 1, "business", "the portal refused the application")
    return {"ein": ein, "name": name, "other": other}


def test_a_viewer_reaches_an_order_from_the_list_and_a_job_and_sees_no_secret(
        env, browser, run):
    ids = _seed(env["dsn"])

    async def go() -> dict[str, Any]:
        ctx = await browser.new_context(base_url=env["base"])
        ctx.set_default_timeout(10_000)
        page = await ctx.new_page()
        csp: list[str] = []
        page.on("console", lambda m: csp.append(m.text)
                if "Content Security Policy" in m.text else None)
        await page.goto("/login")
        await page.fill("input[name=name]", "viewer")
        await page.fill("input[name=password]", PASSWORD)
        await page.click("button[type=submit]")
        await page.wait_for_url(env["base"] + "/")
        seen: dict[str, Any] = {}
        # from the jobs list's order column
        await page.goto("/jobs?job_type=obtain_ein")
        async with page.expect_navigation():
            await page.locator(f"tr[data-job='{ids['ein']}'] a.order").click()
        seen["list_url"] = page.url
        seen["jobs"] = await page.locator("section.order-job").evaluate_all(
            "els => els.map(e => e.dataset.job)")
        seen["order_id"] = await page.locator("#order-id").inner_text()
        seen["statuses"] = await page.locator("section.order-job .badge").all_inner_texts()
        seen["results"] = await page.locator("pre.result").all_inner_texts()
        seen["timeline"] = await page.locator(
            f"section.order-job[data-job='{ids['ein']}'] table.timeline").inner_text()
        seen["html"] = await page.content()
        seen["pwned"] = await page.evaluate("window.pwned === 1")
        # from a job's page
        await page.goto(f"/jobs/{ids['name']}")
        async with page.expect_navigation():
            await page.click("#order-link")
        seen["job_url"] = page.url
        seen["job_jobs"] = await page.locator("section.order-job").evaluate_all(
            "els => els.map(e => e.dataset.job)")
        missing = await page.goto("/orders/ORD-NONE")
        seen["missing"] = missing.status if missing else None
        seen["csp"] = csp
        await ctx.close()
        return seen

    seen = run(go())
    expected = env["base"] + "/orders/ORD%2F7%20a%20b%20%3Cscript%3Ewindow.pwned%3D1%3C%2Fscript%3E"
    assert seen["list_url"] == expected and seen["job_url"] == expected
    assert seen["jobs"] == [str(ids["ein"]), str(ids["name"])] == seen["job_jobs"]
    assert seen["order_id"] == HOSTILE            # markup shown as text, never run
    assert seen["pwned"] is False and seen["csp"] == []
    assert seen["statuses"] == ["failed", "completed"]
    assert json.loads(seen["results"][0]) == {"available": True, "reference": "NR-4411"}
    assert "running → failed" in seen["timeline"] and "a person was told" in seen["timeline"]
    assert "refused" in seen["timeline"]          # the error is there, masked
    assert_no_ssn(seen["html"], "the order page")
    assert seen["missing"] == 404


def test_an_order_id_a_browser_would_drop_as_a_dot_segment_has_its_page(env, browser, run):
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        job = queue.enqueue("name_search", "..", payloads.NAME_SEARCH, conn=c).id

    async def go() -> list[str]:
        ctx = await browser.new_context(base_url=env["base"])
        page = await ctx.new_page()
        await page.goto("/login")
        await page.fill("input[name=name]", "viewer")
        await page.fill("input[name=password]", PASSWORD)
        await page.click("button[type=submit]")
        await page.wait_for_url(env["base"] + "/")
        await page.goto(f"/jobs/{job}")
        async with page.expect_navigation():
            await page.click("#order-link")
        jobs = await page.locator("section.order-job").evaluate_all(
            "els => els.map(e => e.dataset.job)")
        await ctx.close()
        return jobs

    assert run(go()) == [str(job)]

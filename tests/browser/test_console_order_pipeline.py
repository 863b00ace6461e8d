"""Orders in the console (issue 48, item 11): ``/orders`` lists the orders, blocked and at
risk first, and the navigation links it; an order's page shows its steps as a pipeline,
each with its state, its ETA (p50 and p90, from the estimator ``orders show`` uses) and
its deadline; a held step says what it waits for, not in red as a "last error"; an order
whose step failed is flagged blocked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from consolekit import console_env

from portalq.jobs import clock, queue
from portalq.jobs.business import order_runs
from tests.order_inputs import BC_COMPANY, DELAWARE_LLC

pytestmark = pytest.mark.browser
OK, BLOCKED, RISK = "ORD-BC-OK", "ORD-BC-BLOCKED", "ORD-DE-RISK"


def _prepare(dsn: str, artifacts: Any) -> dict[str, Any]:
    """Three orders, oldest first: one going well (its name search pending, the filing and
    the delivery held), one whose name search failed (the rest held behind it), and a
    Delaware order whose portal is paused (its filing has no estimate: its same-day
    cut-off is at risk)."""
    with psycopg.connect(dsn, autocommit=True) as c:
        ok = order_runs.enqueue_order("bc_company", OK, BC_COMPANY, conn=c)
        blocked = order_runs.enqueue_order("bc_company", BLOCKED, BC_COMPANY, conn=c)
        risk = order_runs.enqueue_order("delaware_llc", RISK, DELAWARE_LLC, conn=c)
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 1, "
                  "finished_at = %s, last_error = 'name rejected by the examiner' "
                  "WHERE id = %s", (clock.now(), blocked.jobs["name_search"]))
        queue.pause_portal("delaware_icis", reason="maintenance", conn=c)
    return {"orders": {OK: ok, BLOCKED: blocked, RISK: risk}}


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("pipeline-artifacts"),
                     _prepare) as found:
        yield found


def _steps(run, page) -> dict[str, dict[str, str]]:
    return {s["step"]: s for s in run(page.locator("#pipeline .step").evaluate_all(
        """els => els.map(e => ({step: e.dataset.step, state: e.dataset.state,
             text: e.innerText,
             eta: (e.querySelector('.eta') || {}).innerText || '',
             deadline: (e.querySelector('.deadline') || {}).innerText || ''}))"""))}


def test_the_orders_list_puts_blocked_and_at_risk_orders_first(env, signin, run):
    page = signin("viewer")
    nav = page.locator("header.top nav a", has_text="Orders")
    assert run(nav.count()) == 1
    resp = run(page.goto("/orders"))
    assert resp is not None and resp.status == 200
    rows = run(page.locator("tr[data-order]").evaluate_all(
        "els => els.map(e => [e.dataset.order, e.dataset.state])"))
    assert rows == [[BLOCKED, "blocked"], [RISK, "at-risk"], [OK, "on-its-way"]]
    blocked = run(page.locator(f"tr[data-order='{BLOCKED}']").inner_text())
    assert "name_search failed" in blocked
    assert "at risk" in run(page.locator(f"tr[data-order='{RISK}']").inner_text())

    async def follow() -> None:
        async with page.expect_navigation():
            await page.locator(f"tr[data-order='{OK}'] a.order").click()
    run(follow())
    assert page.url.endswith(f"/orders/{OK}")
    assert page.csp_errors == []


def test_an_orders_page_shows_its_pipeline_with_state_eta_and_deadline(env, signin, run):
    page = signin("viewer")
    run(page.goto(f"/orders/{OK}"))
    steps = _steps(run, page)
    assert list(steps) == ["name_search", "file_entity", "deliver"]
    assert [s["state"] for s in steps.values()] == ["pending", "held", "held"]
    assert "waiting for name_search" in steps["file_entity"]["text"]
    for s in steps.values():          # an estimate each, p50 and p90
        assert "p50" in s["eta"] and "p90" in s["eta"], s
    assert "name reservation" in steps["file_entity"]["deadline"]
    assert "56 days after name_search" in steps["file_entity"]["deadline"]
    assert run(page.locator("#order-blocked").count()) == 0
    # a held step's "waiting for ..." is no error
    errors = run(page.locator(".err").all_inner_texts())
    assert not [e for e in errors if "waiting for" in e], errors
    assert run(page.locator("dt", has_text="last error").count()) == 0


def test_an_order_held_behind_a_failed_step_is_flagged_blocked(env, signin, run):
    page = signin("viewer")
    run(page.goto(f"/orders/{BLOCKED}"))
    flag = run(page.locator("#order-blocked").inner_text())
    assert "blocked" in flag.lower() and "name_search failed" in flag
    steps = _steps(run, page)
    assert [s["state"] for s in steps.values()] == ["failed", "held", "held"]
    assert "no estimate" in steps["file_entity"]["eta"]
    assert "name rejected by the examiner" in steps["name_search"]["text"]


def test_an_order_past_its_deadline_is_flagged_at_risk(env, signin, run):
    page = signin("viewer")
    run(page.goto(f"/orders/{RISK}"))
    risk = run(page.locator("#order-at-risk").inner_text())
    assert "at risk: file_entity must be in by" in risk
    steps = _steps(run, page)
    assert "22:30" in steps["file_entity"]["deadline"]
    assert steps["file_entity"]["state"] == "pending"



def test_a_held_steps_job_page_says_what_it_waits_for_not_as_an_error(env, signin, run):
    """The job page of a held step says "waiting for name_search" as what the job waits
    for, not in red as its "last error" (the order page already did)."""
    page = signin("viewer")
    run(page.goto(f"/jobs/{env['orders'][OK].jobs['file_entity']}"))
    errors = run(page.locator(".err").all_inner_texts())
    assert not [e for e in errors if "waiting for" in e], errors
    assert run(page.locator("dt", has_text="last error").count()) == 0
    waits = run(page.locator("#waiting-for").inner_text())
    assert "waiting for name_search" in waits, waits

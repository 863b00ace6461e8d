"""Live counts (issue 48, item 12): what needs a person is one number on a page -- the
navigation's count, the Needs-you heading and the live overview's figure agree -- and a
new item reaches an open page without a reload (its notification, not the refresh period:
30 s in this module); the jobs list's counts per status are exact at small scale (the
statistics' estimates were far off: 5 pending shown, none real)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from consolekit import console_env, seed
from playwright.async_api import expect

from portalq.jobs import clock, queue
from tests import payloads

pytestmark = pytest.mark.browser
#: within this the notification must have reached the page (the refresh period is 30 s)
WITHIN_MS = 5000


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("counts-artifacts"),
                     lambda dsn, artifacts: {"ids": seed(dsn, artifacts)}) as found:
        yield found


def _fail(dsn: str, order: str, error: str) -> int:
    """A job failing after its every attempt, escalated: a new item of "Needs you"."""
    with psycopg.connect(dsn, autocommit=True) as c:
        job = queue.enqueue("name_search", order, payloads.NAME_SEARCH, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 5, "
                  "finished_at = %s, last_error = %s WHERE id = %s",
                  (clock.now(), error, job))
        queue.escalate(c, job, 5, "attempts", "every attempt failed")
    return job


def _count(run, page, selector: str) -> int:
    return int(run(page.locator(selector).inner_text()).rstrip("+"))


def test_the_overview_says_one_number_and_follows_a_new_item_without_reload(
        env, signin, run):
    page = signin("viewer")
    run(expect(page.locator("#live-state")).to_have_text("live"))
    shown = {s: _count(run, page, s) for s in
             ("#needs-you-count", "#needs-total", "#needs-you-total")}
    assert len(set(shown.values())) == 1, shown
    before = shown["#needs-you-count"]
    run(page.evaluate("window.__marker = 'no reload'"))
    job = _fail(env["dsn"], "ORD-LIVE-NEEDS-1", "the registry refused the form (code 1)")
    for selector in shown:
        run(expect(page.locator(selector)).to_have_text(str(before + 1), timeout=WITHIN_MS))
    run(expect(page.locator(f"#needs article.need[data-jobs~='{job}']")).to_have_count(
        1, timeout=WITHIN_MS))
    assert run(page.evaluate("window.__marker")) == "no reload"
    assert page.csp_errors == []


def test_the_needs_page_and_any_pages_navigation_follow_a_new_item_without_reload(
        env, signin, run):
    needs, jobs = signin("operator"), signin("viewer")
    run(needs.goto("/needs"))
    run(jobs.goto("/jobs"))
    before = _count(run, needs, "#needs-you-count")
    assert _count(run, needs, "#needs-total") == before == _count(run, jobs, "#needs-you-count")
    for page in (needs, jobs):
        run(page.evaluate("window.__marker = 'no reload'"))
    job = _fail(env["dsn"], "ORD-LIVE-NEEDS-2", "a cause of its own: the portal timed out")
    for page in (needs, jobs):
        run(expect(page.locator("#needs-you-count")).to_have_text(str(before + 1),
                                                                   timeout=WITHIN_MS))
    run(expect(needs.locator("#needs-total")).to_have_text(str(before + 1), timeout=WITHIN_MS))
    new = needs.locator(f"#needs article.need[data-jobs~='{job}']")
    run(expect(new).to_have_count(1, timeout=WITHIN_MS))
    assert run(new.locator("form").count()) >= 1        # the operator's controls, usable
    for page in (needs, jobs):
        assert run(page.evaluate("window.__marker")) == "no reload"
        assert page.csp_errors == []


def test_the_jobs_lists_counts_are_exact_at_small_scale(env, signin, run):
    """The statistics taken while 5 jobs were pending, then all of them cancelled: the
    list counts what is there, not what the last ANALYZE saw."""
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        ids = [queue.enqueue("name_search", f"ORD-COUNT-{i}", payloads.NAME_SEARCH,
                             conn=c).id for i in range(5)]
        c.execute("ANALYZE portalq.job_queue")
        c.execute("UPDATE portalq.job_queue SET status = 'cancelled' WHERE id = ANY(%s)",
                  (ids,))
        real = dict(c.execute("SELECT status, count(*) FROM portalq.job_queue "
                              "GROUP BY status").fetchall())
    page = signin("viewer")
    run(page.goto("/jobs"))
    text = run(page.locator(".estimates").inner_text())
    assert not text.startswith("About"), text
    shown = {status: int(n.replace(",", "")) for n, status in
             (part.split() for part in text.split(" · "))}
    assert shown == real, (text, real)


def test_the_needs_heading_counts_what_the_navigation_counts_a_changed_page_too(
        env, signin, run):
    """A portal paused for a page its flow does not know waits for a person: the
    navigation counted it, the Needs-you page neither listed nor counted it."""
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        job = queue.enqueue("obtain_ein", "ORD-CHANGED-1", payloads.OBTAIN_EIN, conn=c).id
        c.execute("UPDATE portalq.portals SET paused_at = now(), paused_by = 'drift', "
                  "pause_reason = 'a page the flow does not know' WHERE code = 'irs_ein'")
        c.execute("UPDATE portalq.job_queue SET status = 'deferred' WHERE id = %s", (job,))
        queue.escalate(c, job, 0, "portal_changed", "a page the flow does not know")
    try:
        page = signin("viewer")
        run(page.goto("/needs"))
        assert _count(run, page, "#needs-total") == _count(run, page, "#needs-you-count")
        item = page.locator(f"article.need[data-need=changed][data-job='{job}']")
        assert run(item.count()) == 1
        text = run(item.inner_text())
        assert "irs_ein" in text and "a page the flow does not know" in text
        assert run(item.locator("a[href='/portals']").count()) == 1
    finally:
        with psycopg.connect(env["dsn"], autocommit=True) as c:
            queue.resume_portal("irs_ein", conn=c)

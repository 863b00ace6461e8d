"""The console's "Needs you" page (issue 39): what needs a person first, each item with
the recommended action, closing by itself when its cause is gone; an approval's review
screenshot full-size beside its buttons; a viewer sees the items but cannot act."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from consolekit import console_env, sign_in_page

from portalq.jobs import clock
from portalq.jobs.admin import needs as console_needs
from tests.needs_seed import seed

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("needs-artifacts")) as found:
        yield found


@pytest.fixture
def signin(env, browser, run):
    contexts: list[Any] = []

    def sign_in(role: str, width: int = 1440, height: int = 900) -> Any:
        return run(sign_in_page(browser, env["base"], role, contexts,
                                   viewport={"width": width, "height": height},
                                   timezone_id="Europe/Berlin"))

    yield sign_in
    for ctx in contexts:
        run(ctx.close())


def _needs(run, page, path: str = "/needs") -> dict[str, list[str]]:
    """{sort: [job ids]} of the items the page lists (a failed group: the jobs it shows,
    its oldest twelve)."""
    run(page.goto(path))
    rows = run(page.locator("article.need").evaluate_all(
        "els => els.map(e => [e.dataset.need, e.dataset.job || e.dataset.jobs])"))
    out: dict[str, list[str]] = {}
    for sort, jobs in rows:
        out.setdefault(sort, []).extend(str(jobs).split())
    return out


def _listed(run, page, job_id: int) -> bool:
    return any(str(job_id) in jobs for jobs in _needs(run, page).values())


def _count(run, page) -> int:
    return int(run(page.locator("#needs-you-count").inner_text()))


def _submit(run, page, form: Any, **fields: str) -> None:
    async def go() -> None:
        for name, value in fields.items():
            await form.locator(f"[name={name}]").fill(value)
        async with page.expect_navigation():
            await form.locator("button[type=submit]").click()
    run(go())


def _state(dsn: str, job_id: int) -> tuple[Any, ...]:
    with psycopg.connect(dsn) as c:
        row = c.execute("SELECT status, checkpoint #>> '{approval,state}', attempts "
                        "FROM portalq.job_queue WHERE id = %s", (job_id,)).fetchone()
        assert row is not None
        return tuple(row)


def test_each_item_leaves_the_needs_page_by_itself_when_its_cause_is_gone(env, signin, run):
    """As an operator and an admin: a question answered there, an approval given there
    and a failed group retried (through the bulk preview, with a reason) and completed
    each leave the page, the front page and the navigation's count -- nobody resolves
    anything."""
    ids = seed(env["dsn"], env["artifacts"], outage=3, tag="LEAVE")
    operator, admin = signin("operator"), signin("admin")
    front = _needs(run, operator, "/")           # the front door lists them too
    listed = _needs(run, operator)
    assert front == listed
    assert str(ids["question"]) in listed["question"]
    assert str(ids["approval"]) in listed["approval"]
    assert str(ids["uncertain"]) in listed["uncertain"]
    assert str(ids["waiting"]) in listed["waiting"]
    group = operator.locator("article.need.failed", has_text="IRS answered 503")
    assert run(group.locator(".n").inner_text()) == "3 ×"   # one line for the outage
    assert "IRS answered # for request #" in run(group.locator(".cause").inner_text())
    count = _count(run, operator)
    assert count == sum(len(v) for v in listed.values())
    assert int(run(operator.locator("#needs-total").inner_text())) == count
    # each item says what to do and what it does; the timestamps say the portal's time
    # and (added by the browser) the viewer's
    q = operator.locator(f"article[data-need=question][data-job='{ids['question']}']")
    assert "The answer goes to the waiting flow once" in run(q.locator(".advice").inner_text())
    assert "portal time" in run(q.locator(".portal-time").inner_text())
    assert "your time" in run(q.locator("time + .local").first.inner_text())
    w = operator.locator(f"article[data-need=waiting][data-job='{ids['waiting']}']")
    assert "never submitted again" in run(w.locator(".advice").inner_text())
    assert run(w.locator("form").count()) == 0    # no action that would not work

    # a question answered (the operator, from the page)
    _submit(run, operator, q.locator("form[action$='/answer']"), answer="483920",
            reason="code from the ops mailbox")
    assert operator.url.startswith(env["base"] + "/needs?")
    assert f"Job {ids['question']}: Answer sent" in run(operator.locator("#done").inner_text())
    assert not _listed(run, operator, ids["question"])
    assert _count(run, operator) == count - 1

    # an approval given (the admin, from the front page)
    run(admin.goto("/"))
    a = admin.locator(f"article[data-need=approval][data-job='{ids['approval']}']")
    _submit(run, admin, a.locator("form[action$='/approve']"), reason="review page checked")
    assert _state(env["dsn"], ids["approval"])[1] == "approved"   # runs again at once
    assert not _listed(run, admin, ids["approval"])
    assert _count(run, admin) == count - 2

    # the outage's group retried through the bulk preview (its reason asked there)
    run(operator.goto("/needs"))
    group = operator.locator("article.need.failed", has_text="IRS answered 503")
    async def retry_group() -> None:
        async with operator.expect_navigation():
            await group.locator("button[type=submit]").click()
    run(retry_group())
    assert "3" in run(operator.locator("#bulk-preview strong").inner_text())
    _submit(run, operator, operator.locator("form[action='/jobs/bulk']"),
            reason="IRS back after the outage")
    assert "3 job(s) retried" in run(operator.locator("#bulk-result").inner_text())
    with psycopg.connect(env["dsn"], autocommit=True) as c:   # the worker completes them
        c.execute("UPDATE portalq.job_queue SET status = 'completed', finished_at = %s "
                  "WHERE id = ANY(%s)", (clock.now(), ids["outage"]))
    after = _needs(run, operator)
    assert not any(str(j) in v for j in ids["outage"] for v in after.values())
    assert _count(run, operator) == count - 5
    assert str(ids["uncertain"]) in after["uncertain"]   # the rest still waits
    with psycopg.connect(env["dsn"]) as c:
        assert c.execute("SELECT count(*) FROM portalq.escalation_handling "
                         "WHERE resolved_at IS NOT NULL").fetchone() == (0,)
    assert operator.csp_errors == [] and admin.csp_errors == []


def test_a_group_larger_than_a_bulk_action_offers_its_oldest(env, signin, run, monkeypatch):
    """A group of more failed jobs than one bulk action takes (10,000; 2 here) says how many
    failed and offers to retry its oldest ones -- not a button that can only answer
    "narrow it"."""
    monkeypatch.setattr(console_needs, "BULK_CAP", 2)
    ids = seed(env["dsn"], env["artifacts"], outage=3, tag="CAPPED")
    try:
        operator = signin("operator")
        run(operator.goto("/needs"))
        group = operator.locator("article.need.failed", has_text="IRS answered 503")
        assert run(group.locator(".n").inner_text()) == "3 ×"
        button = group.locator("button[type=submit]")
        assert run(button.inner_text()) == "Retry the oldest 2 of 3…"
        oldest = " ".join(str(i) for i in ids["outage"][:2])
        assert run(group.locator("input[name=ids]").input_value()) == oldest

        async def retry_group() -> None:
            async with operator.expect_navigation():
                await button.click()
        run(retry_group())
        assert run(operator.locator("#bulk-preview strong").inner_text()).startswith("2")
    finally:   # the module's other tests count their own outage's group
        with psycopg.connect(env["dsn"], autocommit=True) as c:
            c.execute("UPDATE portalq.job_queue SET status = 'completed', finished_at = %s "
                      "WHERE id = ANY(%s)", (clock.now(), ids["outage"]))


def test_a_viewer_sees_the_items_but_cannot_act(env, signin, run):
    ids = seed(env["dsn"], env["artifacts"], outage=2, tag="VIEW")
    viewer = signin("viewer")
    listed = _needs(run, viewer)
    for sort in ("question", "approval", "uncertain", "waiting"):
        assert str(ids[sort]) in listed[sort], sort
    assert run(viewer.locator("section.needs form").count()) == 0
    assert run(viewer.locator("section.needs button, section.needs input").count()) == 0
    a = viewer.locator(f"article[data-need=approval][data-job='{ids['approval']}']")
    assert run(a.locator("img.review-shot").count()) == 1   # the evidence, without buttons

    with psycopg.connect(env["dsn"]) as c:
        audit_before = c.execute("SELECT count(*) FROM portalq.audit_log").fetchone()
    before = {k: _state(env["dsn"], ids[k]) for k in ("question", "approval", "uncertain")}
    token = next(c["value"] for c in run(viewer.context.cookies()) if c["name"] == "csrftoken")
    forged = [(f"/jobs/{ids['question']}/answer", {"answer": "1", "back": "/needs"}),
              (f"/jobs/{ids['approval']}/approve", {"back": "/needs"}),
              (f"/jobs/{ids['uncertain']}/confirm_filed", {"confirmation": "99-1"}),
              (f"/jobs/{ids['uncertain']}/not_filed", {}),
              ("/jobs/bulk", {"action": "retry", "id": str(ids["outage"][0]),
                              "confirm": "yes", "expected": "1"})]
    for path, fields in forged:
        resp = run(viewer.context.request.post(path, form={
            "csrftoken": token, "reason": "forged", **fields}, max_redirects=0))
        assert resp.status == 403, (path, resp.status)
    assert {k: _state(env["dsn"], ids[k]) for k in before} == before
    with psycopg.connect(env["dsn"]) as c:
        assert c.execute("SELECT count(*) FROM portalq.audit_log").fetchone() == audit_before
        assert c.execute("SELECT count(*) FROM portalq.job_questions WHERE job_id = %s AND "
                         "answered_at IS NOT NULL", (ids["question"],)).fetchone() == (0,)
        assert c.execute("SELECT status FROM portalq.job_queue WHERE id = %s",
                         (ids["outage"][0],)).fetchone() == ("failed",)
    assert _listed(run, viewer, ids["question"])


def _box(run, locator: Any) -> dict[str, float]:
    box = run(locator.bounding_box())
    assert box is not None
    return box


def test_the_approval_page_shows_the_review_screenshot_beside_the_buttons(env, signin, run):
    """At 1440 px the review page's screenshot is shown full-size (not a thumbnail) with
    Approve and Reject beside it, at its top; it is the review screenshot, not the failure
    shot the waiting attempt ended with, and no red "last error" while it waits. At 390 px
    the buttons come under it."""
    ids = seed(env["dsn"], env["artifacts"], outage=0, tag="LAYOUT")
    job = ids["approval"]
    for role in ("operator", "admin"):
        page = signin(role)
        run(page.goto(f"/jobs/{job}"))
        shot = page.locator("#approval img.review-shot")
        src = run(shot.get_attribute("src"))
        with psycopg.connect(env["dsn"]) as c:
            path = c.execute("SELECT path FROM portalq.job_artifacts WHERE id = %s",
                             (int(str(src).rsplit("/", 1)[1]),)).fetchone()[0]
        assert path.endswith("03-review-for-approval.png")
        assert run(shot.evaluate("img => img.complete && img.naturalWidth")) == 1200
        img, approve, reject = (_box(run, shot), _box(run, page.locator("#approve")),
                                _box(run, page.locator("#reject")))
        assert img["width"] >= 640, img                      # full-size, not a thumbnail
        for button in (approve, reject):
            assert button["x"] >= img["x"] + img["width"], (img, button)   # beside it
            assert img["y"] <= button["y"] < img["y"] + img["height"] / 2, (img, button)
        assert approve["y"] + approve["height"] <= 900       # on the first screen
        assert run(page.locator("dt", has_text="last error").count()) == 0
        facts = run(page.locator("dl.facts").inner_text())   # the portal's and viewer's time
        assert "portal time" in facts and "your time" in facts, facts
        assert run(page.locator("#approval").inner_text()).count("digest") == 1
        assert page.csp_errors == []
    phone = signin("operator", 390, 844)
    run(phone.goto(f"/jobs/{job}"))
    img = _box(run, phone.locator("#approval img.review-shot"))
    approve = _box(run, phone.locator("#approve"))
    assert approve["y"] >= img["y"] + img["height"] and img["width"] <= 390
    section = _box(run, phone.locator("#approval"))
    assert section["x"] >= 0 and section["x"] + section["width"] <= 390 + 1, section
    viewer = signin("viewer")
    run(viewer.goto(f"/jobs/{job}"))
    assert run(viewer.locator("#approval img.review-shot").count()) == 1
    assert run(viewer.locator("#approval form, #approve, #reject").count()) == 0

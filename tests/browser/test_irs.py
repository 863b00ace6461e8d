"""obtain_ein against the IRS EIN Assistant stand-in, in real Chromium."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flowkit import SSN, assert_no_secret, inflate_all

from portalq.jobs.clock import FrozenClock, set_clock
from portalq.jobs.errors import (
    BusinessError,
    DeferUntil,
    PortalClosed,
    RetryableError,
    UncertainOutcome,
)
from portalq.portals.flows.base import next_midnight
from portalq.portals.flows.irs import obtain_ein
from tests.checkpoints import record, state

pytestmark = pytest.mark.browser

PORTAL = "irs_ein"
# a Tuesday, 10:00 in New York: the IRS day is 2026-03-10
TUESDAY_10_ET = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)


@pytest.fixture
def irs_ctx(make_ctx, ein_payload):
    """A context for obtain_ein, traced per playwright.config (retain-on-failure): every
    failing attempt leaves a trace.zip that ``fails`` greps for the SSN."""
    def build(**overrides: Any):
        return make_ctx("obtain_ein", ein_payload(**overrides))
    return build


def fails(run, ctx, exc_type):
    with pytest.raises(exc_type) as info:
        run(obtain_ein(ctx))
    assert SSN not in str(info.value) and SSN.replace("-", "") not in str(info.value)
    assert (ctx.artifacts_dir / "trace.zip").exists() or ctx.contexts_opened == 0
    assert_no_secret(ctx.artifacts_root)
    return info.value


def test_obtain_ein_end_to_end(run, portals, make_ctx, ein_payload):
    ctx = make_ctx("obtain_ein", ein_payload(), trace_policy="on")
    result = run(obtain_ein(ctx))

    assert re.fullmatch(r"\d{2}-\d{7}", result["ein"])
    [name] = result["documents"]
    assert re.fullmatch(r"CP575_\d{13}\.pdf", name)
    [(stored, content_type, pdf)] = ctx.documents.by_job[ctx.job_id]
    assert (stored, content_type) == (name, "application/pdf") and pdf.startswith(b"%PDF-")
    text = inflate_all(pdf)
    assert result["ein"].encode() in text and b"Acme Widgets LLC" in text
    assert b"6789" not in text  # the letter carries no part of the SSN
    assert state(ctx.checkpoints, "ein_application") == "confirmed"
    assert record(ctx.checkpoints, "ein_application").confirmation["ein"] == result["ein"]

    [entry] = portals.ledger(PORTAL)
    assert entry["ein"] == result["ein"] and entry["legal_name"] == "Acme Widgets LLC"
    assert re.fullmatch(r"[0-9a-f]{64}", entry["ssn_sha256"])
    assert "6789" not in str(entry)
    shots = sorted(p.name for p in ctx.artifacts_dir.glob("*.png"))
    assert shots == ["01-landing.png", "02-legal-structure.png", "03-identity.png",
                     "04-addresses.png", "05-details.png", "06-review.png",
                     "07-ein-assignment.png"]
    assert (ctx.artifacts_dir / "trace.zip").exists()
    assert assert_no_secret(ctx.artifacts_root) > 10


def test_closed_notice_defers(run, portals, irs_ctx):
    portals.control(PORTAL, hours="closed")
    exc = fails(run, irs_ctx(), PortalClosed)
    assert not exc.outage and exc.reopen_at is None
    assert portals.ledger(PORTAL) == []


def test_maintenance_is_an_outage(run, portals, irs_ctx):
    portals.control(PORTAL, maintenance=True)
    assert fails(run, irs_ctx(), PortalClosed).outage


@pytest.mark.parametrize("code", ["109", "113"])
def test_system_error_is_retryable_and_restart_is_safe(run, portals, irs_ctx, code):
    portals.control(PORTAL, error_code=code, error_times=1)
    ctx = irs_ctx()
    exc = fails(run, ctx, RetryableError)
    assert code in str(exc) and "24 hours" in str(exc)
    assert state(ctx.checkpoints, "ein_application") == "refused"
    assert ctx.checkpoints["last_error"] == code
    if code != "109":
        return
    retry = ctx.retry()
    assert re.fullmatch(r"\d{2}-\d{7}", run(obtain_ein(retry))["ein"])
    assert len(portals.ledger(PORTAL)) == 1


def test_error_101_is_a_business_error(run, portals, irs_ctx):
    portals.control(PORTAL, error_code="101", error_times=1)
    assert "101" in str(fails(run, irs_ctx(), BusinessError))


def test_second_ein_same_responsible_party_same_day_is_deferred(run, portals, irs_ctx):
    clock = FrozenClock(TUESDAY_10_ET)
    set_clock(clock)
    run(obtain_ein(irs_ctx()))
    second = irs_ctx(legal_name="Second Venture LLC")
    exc = fails(run, second, DeferUntil)
    assert exc.when == next_midnight("America/New_York", TUESDAY_10_ET)
    assert exc.when == datetime(2026, 3, 11, 4, 0, tzinfo=UTC)  # midnight EDT
    assert state(second.checkpoints, "ein_application") == "refused"
    assert len(portals.ledger(PORTAL)) == 1
    clock.set(exc.when + timedelta(hours=8))  # next IRS day, 08:00 ET
    assert run(obtain_ein(second.retry()))["ein"]
    assert len(portals.ledger(PORTAL)) == 2


def test_duplicate_application_is_refused(run, portals, irs_ctx):
    run(obtain_ein(irs_ctx()))
    assert "101" in str(fails(run, irs_ctx(), BusinessError))
    assert len(portals.ledger(PORTAL)) == 1


def test_dropped_answer_is_uncertain_and_never_resubmitted(run, portals, irs_ctx):
    portals.control(PORTAL, drop_after_submit=True)
    ctx = irs_ctx()
    fails(run, ctx, UncertainOutcome)
    assert state(ctx.checkpoints, "ein_application") == "submitting"
    assert not record(ctx.checkpoints, "ein_application").confirmation
    assert len(portals.ledger(PORTAL)) == 1
    portals.control(PORTAL, drop_after_submit=False)
    retry = ctx.retry()
    fails(run, retry, UncertainOutcome)
    assert retry.contexts_opened == 0  # not even a browser
    assert len(portals.ledger(PORTAL)) == 1


def idle_before_each_page(ctx, gap: timedelta, from_page: int = 1) -> FrozenClock:
    """The user "idles" ``gap`` before each page request (from the ``from_page``-th on):
    the clock moves while the request is held by a route, so the portal sees the gap."""
    clock = FrozenClock(TUESDAY_10_ET)
    set_clock(clock)
    seen = 0

    async def hold(route):
        nonlocal seen
        if route.request.is_navigation_request():
            seen += 1
            if seen >= from_page:
                clock.advance(seconds=gap.total_seconds())
        await route.continue_()

    async def on_context(context):
        await context.route("**/*", hold)

    ctx.context_hooks.append(on_context)
    return clock


def test_idle_over_15_minutes_expires_the_session_mid_flow(run, portals, irs_ctx):
    ctx = irs_ctx()
    idle_before_each_page(ctx, timedelta(minutes=15, seconds=1), from_page=4)
    exc = fails(run, ctx, RetryableError)
    assert "session expired" in str(exc)
    assert state(ctx.checkpoints, "ein_application") is None and portals.ledger(PORTAL) == []


def test_idle_under_15_minutes_keeps_the_session(run, portals, irs_ctx):
    ctx = irs_ctx()
    idle_before_each_page(ctx, timedelta(minutes=14, seconds=59))
    assert run(obtain_ein(ctx))["ein"]


def test_session_expiry_fault_then_retry(run, portals, irs_ctx):
    portals.control(PORTAL, expire_session=True)
    ctx = irs_ctx()
    assert "session expired" in str(fails(run, ctx, RetryableError))
    assert state(ctx.checkpoints, "ein_application") is None  # expired before the point of no return
    assert run(obtain_ein(ctx.retry()))["ein"]


def test_unexpected_dialogs_are_accepted_on_a_slow_portal(run, portals, irs_ctx):
    # alert on load, confirm() before each Continue (dismissing it would stop the form)
    portals.control(PORTAL, dialog=True, slow_ms=100)
    assert run(obtain_ein(irs_ctx()))["ein"]


def test_changed_selector_is_retryable_with_a_clear_message(run, portals, irs_ctx):
    portals.control(PORTAL, changed_selector=True)
    exc = fails(run, irs_ctx(), RetryableError)
    assert str(exc) == "Continue control not found: portal changed?"


def test_itin_instead_of_ssn(run, portals, make_ctx, ein_payload):
    itin = "912-70-1234"
    payload = ein_payload(responsible_party={"first_name": "Li", "last_name": "Wei",
                                             "itin": itin})
    ctx = make_ctx("obtain_ein", payload, trace_policy="on")
    assert run(obtain_ein(ctx))["ein"]
    assert (ctx.artifacts_dir / "trace.zip").exists()
    assert_no_secret(ctx.artifacts_root, itin)


@pytest.mark.parametrize("overrides, message", [
    ({"state": "ON"}, "no 'State where located' option 'ON'"),
    ({"address": {"street": "1 Rue", "city": "Ottawa", "region": "DE",
                  "postal_code": "K1A 0B1"}}, "IRS rejected Addresses: Please enter a valid ZIP"),
])
def test_input_the_irs_refuses_is_a_business_error(run, portals, irs_ctx, overrides, message):
    assert message in str(fails(run, irs_ctx(**overrides), BusinessError))
    assert portals.ledger(PORTAL) == []


def test_retry_after_ein_only_fetches_the_letter(run, portals, irs_ctx):
    ctx = irs_ctx()
    ein = run(obtain_ein(ctx))["ein"]
    retry = ctx.retry()
    retry.documents.by_job.clear()  # the letter was lost, the EIN checkpoint was not
    portals.control(PORTAL, hours="closed")  # the application pages are not needed
    result = run(obtain_ein(retry))
    assert result["ein"] == ein and retry.documents.by_job[ctx.job_id][0][2].startswith(b"%PDF-")
    assert len(portals.ledger(PORTAL)) == 1
    again = retry.retry()  # letter present too: nothing to do at all
    assert run(obtain_ein(again))["ein"] == ein and again.contexts_opened == 0


# --- fidelity of the stand-in itself ---------------------------------------------------

@pytest.fixture
def page(run, browser):
    context = run(browser.new_context())
    page = run(context.new_page())
    page.set_default_timeout(5000)
    yield page
    run(context.close())


def test_standin_closed_notice_has_no_form(run, portals, page):
    portals.control(PORTAL, hours="closed")
    response = run(page.goto(portals.url("irs") + "/"))
    assert response.status == 200
    assert "not available at this time" in run(page.inner_text("body"))
    assert run(page.locator("form, input, button").count()) == 0


def test_standin_radio_input_clicks_do_not_register(run, portals, page):
    async def scenario():
        await page.goto(portals.url("irs") + "/")
        await page.get_by_role("button", name="Begin Application").click()
        radio = page.get_by_label("Limited Liability Company (LLC)")  # the input itself
        await radio.dispatch_event("click")  # a click on the input, not on its label
        assert await radio.is_checked()  # the browser checked it ...
        assert not await page.locator("#members-group").is_visible()  # ... the app did not
        async with page.expect_navigation():
            await page.get_by_role("button", name="Continue").click()
        step = await page.locator("li[aria-current=step]").text_content()
        assert " ".join(step.split()) == "Legal Structure active"
        return await page.get_by_role("alert").inner_text()

    assert "required fields" in run(scenario())


def test_standin_jumping_ahead_returns_to_the_earliest_incomplete_step(run, portals, page):
    async def scenario():
        await page.goto(portals.url("irs") + "/")
        await page.get_by_role("button", name="Begin Application").click()
        await page.wait_for_url("**/apply/legal-structure")
        await page.goto(portals.url("irs") + "/apply/review")
        return page.url, await page.locator("li[aria-current=step]").text_content()

    url, step = run(scenario())
    assert url.endswith("/apply/legal-structure") and " ".join(step.split()) == \
        "Legal Structure active"

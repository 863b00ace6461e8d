"""file_entity (BC) against the BC Registries incorporation stand-in, in real Chromium."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from bckit import (
    ANN,
    BC,
    BO,
    FILE_ENTITY,
    MONDAY_10_PT,
    NAME_SEARCH,
    build,
    crash_after_checkpoint,
    entries,
)
from flowkit import inflate_all

from portalq.jobs.clock import FrozenClock, set_clock
from portalq.jobs.errors import (
    BusinessError,
    DeferUntil,
    PortalClosed,
    RetryableError,
)
from portalq.jobs.waiting import WaitOnPortal
from portalq.portals.bc.flow import file_entity_bc, name_search
from tests.checkpoints import record, state

pytestmark = pytest.mark.browser


def bc_ctx(make_ctx, traced=False, **overrides):
    """Traced per playwright.config only where asked: tracing is tested elsewhere and costs.
    One person in every role unless the test says otherwise (fewer pages to fill)."""
    overrides = {"directors": [ANN], **overrides}
    return make_ctx("file_entity", build(FILE_ENTITY, **overrides),
                    trace_policy=None if traced else "off")


def obtain_nr(run, make_ctx, name="Cedar Harbour Consulting Ltd.", **overrides):
    ctx = make_ctx("name_search", build(NAME_SEARCH, names=[name], **overrides),
                   trace_policy="off")
    return run(name_search(ctx))["nr_number"]


def test_numbered_company_end_to_end(run, portals, make_ctx):
    ctx = bc_ctx(make_ctx, traced=True, directors=[ANN, BO])
    result = run(file_entity_bc(ctx))

    number = result["incorporation_number"]
    assert re.fullmatch(r"BC\d{7}", number)
    assert result["legal_name"] == f"{number[2:]} B.C. Ltd." and result["nr_number"] is None
    [(name, content_type, pdf)] = ctx.documents.by_job[ctx.job_id]
    assert result["documents"] == [name] and content_type == "application/pdf"
    assert pdf.startswith(b"%PDF-") and number.encode() in inflate_all(pdf)
    [filing] = portals.ledger(BC)
    assert filing["kind"] == "incorporation" and filing["incorporation_number"] == number
    assert filing["fee"] == "$350.00" and filing["directors"] == ["Ann Lee", "Bo Chan"]
    assert filing["completing_party"] == "Ann Lee" and filing["incorporators"] == ["Ann Lee"]
    assert filing["reference"] == record(ctx.checkpoints, "incorporation").reference
    assert state(ctx.checkpoints, "incorporation") == "confirmed"
    assert record(ctx.checkpoints, "incorporation").confirmation["incorporation_number"] == number
    shots = sorted(p.name for p in ctx.artifacts_dir.glob("*.png"))
    assert shots == ["01-inc-start.png", "02-step1.png", "03-step2.png", "04-step3.png",
                     "05-step4.png", "06-review.png", "07-filed.png", "08-paybc.png",
                     "09-paid.png"]
    # File and Pay went to PayBC (Actions.vue), whose Pay is its own point of no return
    assert state(ctx.checkpoints, "paybc") == "confirmed"
    assert re.fullmatch(r"T[A-Za-z0-9]{9}", ctx.checkpoints["temporary_number"])


def test_named_ulc_requests_its_nr_first(run, portals, make_ctx):
    ctx = bc_ctx(make_ctx, entity_type="ULC", legal_name="Cedar Harbour Holdings ULC")
    result = run(file_entity_bc(ctx))

    [nr] = entries(portals, BC, "name_request")
    [filing] = entries(portals, BC, "incorporation")
    assert nr["entity_type"] == "ULC" and nr["state"] == "APPROVED"
    assert result["nr_number"] == nr["nr_number"] == filing["nr_number"]
    assert result["legal_name"] == filing["legal_name"] == "Cedar Harbour Holdings ULC"
    assert filing["fee"] == "$1,000.00"
    assert ctx.checkpoints["nr_number"] == nr["nr_number"]


def test_retry_with_nr_checkpoint_requests_no_second_nr(run, portals, make_ctx):
    ctx = bc_ctx(make_ctx, legal_name="Cedar Harbour Consulting Ltd.")
    crash_after_checkpoint(ctx, portals, "nr_number", maintenance=True)
    with pytest.raises(PortalClosed):   # created (a temporary number), not paid
        run(file_entity_bc(ctx))
    [nr] = entries(portals, BC, "name_request")
    assert ctx.checkpoints["nr_number"] == nr["nr_number"] == nr["temp_number"]

    portals.control(BC, maintenance=False)
    result = run(file_entity_bc(ctx.retry()))
    # the NR was not requested again: that one was paid (its real number) and used
    [nr] = entries(portals, BC, "name_request")
    assert nr["payment"]["amount"] == "$30.00"
    [filing] = entries(portals, BC, "incorporation")
    assert result["nr_number"] == filing["nr_number"] == nr["nr_number"]


def test_answer_lost_after_filing_is_reconciled(run, portals, make_ctx):
    portals.control(BC, drop_after_submit=True)
    ctx = bc_ctx(make_ctx)
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(file_entity_bc(ctx))
    assert state(ctx.checkpoints, "incorporation") == "submitting"
    assert not record(ctx.checkpoints, "incorporation").confirmation

    portals.control(BC, drop_after_submit=False)
    result = run(file_entity_bc(ctx.retry()))
    [filing] = portals.ledger(BC)  # filed exactly once
    assert result["incorporation_number"] == filing["incorporation_number"]
    assert result["reconciled"] is True
    [(_, _, pdf)] = ctx.documents.by_job[ctx.job_id]
    assert pdf.startswith(b"%PDF-")


def test_system_error_at_filing_the_dashboard_shows_it_unfiled_and_it_is_filed_once(
        run, portals, make_ctx):
    """File and Pay answered a system error before the registry saved anything: the
    temporary registration's dashboard (the lookup) shows the application not filed, so
    the retry files it -- once (test first: the invented /filings search could not tell,
    and the job waited a day for a person)."""
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, error_code="503", error_times=1)
    ctx = bc_ctx(make_ctx)
    with pytest.raises(RetryableError, match="system error 503"):
        run(file_entity_bc(ctx))
    assert state(ctx.checkpoints, "incorporation") == "submitting"
    assert entries(portals, BC, "incorporation") == []
    result = run(file_entity_bc(ctx.retry()))
    [filing] = entries(portals, BC, "incorporation")
    assert result["incorporation_number"] == filing["incorporation_number"]
    assert filing["payment"]["amount"] == "$350.00"


def test_no_answer_from_paybc_after_paying_is_read_on_the_dashboard_never_paid_twice(
        run, portals, make_ctx):
    """PayBC took the payment and the connection dropped before its answer: the dashboard
    shows the filing PAID -- the job waits for the registry, nothing is paid again."""
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, decide_after_seconds=3600)
    ctx = bc_ctx(make_ctx)
    crash_after_checkpoint(ctx, portals, "confirmed:incorporation", drop_after_submit=True)
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(file_entity_bc(ctx))
    assert state(ctx.checkpoints, "paybc") == "submitting"
    portals.control(BC, drop_after_submit=False)
    with pytest.raises(WaitOnPortal, match="the registry to complete T"):
        run(file_entity_bc(ctx.retry()))
    clock.advance(hours=1, seconds=1)
    result = run(file_entity_bc(ctx.retry().retry()))
    [filing] = entries(portals, BC, "incorporation")   # one filing, one payment
    assert result["incorporation_number"] == filing["incorporation_number"]
    assert filing["payment"]["amount"] == "$350.00"


def test_dropped_answer_while_the_registry_completes_later_files_and_pays_once(
        run, portals, make_ctx):
    """File and Pay's answer (Actions.vue's redirect to PayBC) is lost: the dashboard shows
    the filing saved, unpaid; the retry pays it from there (once), then waits while the
    registry keeps it as a temporary registration for hours (no second filing, no second
    payment) and ends with the BC number once the registry completes it."""
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    number = obtain_nr(run, make_ctx)
    portals.control(BC, drop_after_submit=True, decide_after_seconds=4 * 3600)
    ctx = bc_ctx(make_ctx, nr_number=number)
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(file_entity_bc(ctx))
    portals.control(BC, drop_after_submit=False)
    attempt = ctx
    for _ in range(3):
        clock.advance(hours=1)
        attempt = attempt.retry()
        with pytest.raises(WaitOnPortal):
            run(file_entity_bc(attempt))
        assert len(entries(portals, BC, "incorporation")) == 1
        assert entries(portals, BC, "incorporation")[0]["payment"]["amount"] == "$350.00"
    clock.advance(hours=2, seconds=1)   # paid at the first retry, completed 4 h later
    done = attempt.retry()
    result = run(file_entity_bc(done))
    [filing] = entries(portals, BC, "incorporation")
    assert result["incorporation_number"] == filing["incorporation_number"]
    assert filing["payment"]["amount"] == "$350.00" and result["reconciled"] is True
    assert done.documents.by_job[ctx.job_id][0][2].startswith(b"%PDF-")


def test_file_and_pay_gives_a_temporary_registration_then_waits(run, portals, make_ctx):
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    number = obtain_nr(run, make_ctx)
    portals.control(BC, decide_after_seconds=3600)
    ctx = bc_ctx(make_ctx, nr_number=number)
    with pytest.raises(WaitOnPortal, match=r"the registry to complete T[A-Za-z0-9]{9}\b"):
        run(file_entity_bc(ctx))
    [filing] = entries(portals, BC, "incorporation")
    assert record(ctx.checkpoints, "incorporation").confirmation["temporary_number"] == \
        filing["temporary_number"]
    clock.advance(hours=1, seconds=1)
    result = run(file_entity_bc(ctx.retry()))
    assert result["incorporation_number"] == filing["incorporation_number"]
    assert len(entries(portals, BC, "incorporation")) == 1


def test_expired_nr_is_a_business_error(run, portals, make_ctx):
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    number = obtain_nr(run, make_ctx)
    clock.advance(days=57)  # reserved 56 days
    with pytest.raises(BusinessError, match=f"Name Request {number} expired on 2026-04-27"):
        run(file_entity_bc(bc_ctx(make_ctx, nr_number=number)))
    assert entries(portals, BC, "incorporation") == []


def test_used_nr_is_a_business_error(run, portals, make_ctx):
    number = obtain_nr(run, make_ctx)
    portals.server.state[BC].record({  # a filing made with this NR elsewhere
        "kind": "incorporation", "incorporation_number": "BC7654321", "nr_number": number,
        "legal_name": "Cedar Harbour Consulting Ltd.", "reference": "", "status": "COMPLETED"})
    with pytest.raises(BusinessError, match="has already been used"):
        run(file_entity_bc(bc_ctx(make_ctx, nr_number=number)))


def test_nr_type_mismatch_is_a_business_error(run, portals, make_ctx):
    number = obtain_nr(run, make_ctx)
    with pytest.raises(BusinessError, match="is for a BC Limited Company; it cannot be used "
                                            "for a BC Unlimited Liability Company"):
        run(file_entity_bc(bc_ctx(make_ctx, nr_number=number, entity_type="ULC")))


def test_conditional_nr_needs_consent(run, portals, make_ctx):
    ctx = bc_ctx(make_ctx, legal_name="Cedar Trust Ltd.")
    with pytest.raises(BusinessError, match="CONDITIONAL.*consent letter needed"):
        run(file_entity_bc(ctx))
    # the payload says consent was received: the same NR is used, no new request
    ctx.payload["nr_consent_received"] = True
    result = run(file_entity_bc(ctx.retry()))
    assert result["legal_name"] == "Cedar Trust Ltd."
    assert len(entries(portals, BC, "name_request")) == 1


@pytest.mark.parametrize("overrides, message", [
    ({"directors": []}, "At least one Director is required"),
    ({"registered_office": {**FILE_ENTITY["registered_office"], "region": "AB"}},
     "registered office must be in British Columbia"),
    ({"nr_number": "NR 0000001"}, "Name Request NR 0000001 was not found"),
])
def test_registry_rules_are_business_errors(run, portals, make_ctx, overrides, message):
    with pytest.raises(BusinessError, match=message):
        run(file_entity_bc(bc_ctx(make_ctx, **overrides)))
    assert portals.ledger(BC) == []


@pytest.mark.parametrize("faults, message", [
    ({"expire_session": True}, "session expired at Add People and Roles"),
    ({"changed_selector": True}, "no button 'Continue' on Define Your Company.*portal changed"),
])
def test_mid_application_faults_are_retryable(run, portals, make_ctx, faults, message):
    portals.control(BC, **faults)
    with pytest.raises(RetryableError, match=message):
        run(file_entity_bc(bc_ctx(make_ctx)))
    assert portals.ledger(BC) == []


def test_jumping_ahead_returns_to_the_earliest_incomplete_step(run, portals, browser):
    async def scenario():
        context = await browser.new_context()
        page = await context.new_page()
        try:
            await page.goto(portals.url("bc") + "/inc")
            await page.get_by_role("button", name="Start Incorporation Application").click()
            await page.wait_for_url("**/inc/step/1?id=T*")
            await page.goto(portals.url("bc") + "/inc/step/4")
            current = page.locator("ol.progress li[aria-current=step]")
            return page.url, await current.inner_text(), await current.get_attribute("class")
        finally:
            await context.close()

    url, label, classes = run(scenario())
    assert "/inc/step/1?id=T" in url and label == "Define Your Company"
    assert "active" in classes.split()


MONDAY_2030_PT = datetime(2026, 3, 3, 4, 30, tzinfo=UTC)
MONDAY_2055_PT = datetime(2026, 3, 3, 4, 55, tzinfo=UTC)   # PayBC closes in 5 minutes
MONDAY_2130_PT = datetime(2026, 3, 3, 5, 30, tzinfo=UTC)   # PayBC closes at 21:00 Pacific
TUESDAY_0600_PT = datetime(2026, 3, 3, 14, 0, tzinfo=UTC)


@pytest.fixture
def paybc_hours(monkeypatch):
    """PayBC's own hours, not the tests' any-hour stand-in setting (tests/conftest.py)."""
    monkeypatch.delenv("PORTALQ_STEP_HOURS_BC_CORPORATE_ONLINE_PAYMENT", raising=False)


@pytest.mark.usefixtures("paybc_hours")
@pytest.mark.parametrize("at", [MONDAY_2130_PT, MONDAY_2055_PT], ids=["closed", "closing"])
def test_paybc_closed_on_arrival_defers_before_the_job_starts(run, portals, make_ctx, at):
    """Monday 21:30 Pacific the registry is open and PayBC is not (and at 20:55 it closes
    before the flow could reach it): the job does not start -- no browser, nothing saved, no
    attempt spent (a deferral) -- and at PayBC's opening it files and pays once."""
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    number = obtain_nr(run, make_ctx)
    clock.set(at)
    portals.control(BC, hours="calendar")
    ctx = bc_ctx(make_ctx, nr_number=number)
    with pytest.raises(DeferUntil, match="PayBC") as info:
        run(file_entity_bc(ctx))
    assert type(info.value) is DeferUntil and info.value.when == TUESDAY_0600_PT
    assert ctx.contexts_opened == 0 and entries(portals, BC, "incorporation") == []
    assert state(ctx.checkpoints, "incorporation") is None
    clock.set(TUESDAY_0600_PT)
    result = run(file_entity_bc(ctx.retry()))
    [filing] = entries(portals, BC, "incorporation")
    assert result["incorporation_number"] == filing["incorporation_number"]
    assert filing["payment"]["amount"] == "$350.00"


@pytest.mark.usefixtures("paybc_hours")
def test_saved_draft_after_paybc_closed_waits_then_pays_the_draft_once(
        run, portals, make_ctx):
    """PayBC fails at 20:30 (the filing is saved as a DRAFT); by the retry PayBC has closed:
    the job waits for its opening (no attempt), then pays that draft from its dashboard:
    one filing, one payment."""
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    number = obtain_nr(run, make_ctx)
    clock.set(MONDAY_2030_PT)
    portals.control(BC, hours="calendar", payment_down=True)
    ctx = bc_ctx(make_ctx, nr_number=number)
    with pytest.raises(RetryableError, match="saved as a DRAFT"):
        run(file_entity_bc(ctx))
    [filing] = entries(portals, BC, "incorporation")
    assert filing["status"] == "DRAFT" and filing["payment"] is None
    assert record(ctx.checkpoints, "incorporation").confirmation["draft"] is True
    portals.control(BC, payment_down=False)
    clock.set(MONDAY_2130_PT)   # PayBC closed: the draft is not paid, nothing refiled
    again = ctx.retry()
    with pytest.raises(DeferUntil, match="saved as a DRAFT; PayBC is closed") as info:
        run(file_entity_bc(again))
    assert info.value.when == TUESDAY_0600_PT
    [filing] = entries(portals, BC, "incorporation")
    assert filing["payment"] is None
    clock.set(TUESDAY_0600_PT)
    result = run(file_entity_bc(again.retry()))
    [filing] = entries(portals, BC, "incorporation")
    assert result["incorporation_number"] == filing["incorporation_number"]
    assert filing["payment"]["draft"] is True and filing["payment"]["amount"] == "$350.00"


def test_a_failed_payment_is_retried_as_the_drafts_payment(run, portals, make_ctx):
    set_clock(FrozenClock(MONDAY_10_PT))
    number = obtain_nr(run, make_ctx)
    portals.control(BC, payment_down=True)
    ctx = bc_ctx(make_ctx, nr_number=number)
    with pytest.raises(RetryableError, match="draft's payment is retried, never the filing"):
        run(file_entity_bc(ctx))
    retry = ctx.retry()
    with pytest.raises(RetryableError, match="saved as a DRAFT"):
        run(file_entity_bc(retry))   # PayBC still failing: the draft's payment again
    portals.control(BC, payment_down=False)
    result = run(file_entity_bc(retry.retry()))
    [filing] = entries(portals, BC, "incorporation")   # one filing, one payment
    assert result["incorporation_number"] == filing["incorporation_number"]
    assert filing["payment"]["draft"] is True

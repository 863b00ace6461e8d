"""name_search against the BC Registries Name Request stand-in, in real Chromium."""

from __future__ import annotations

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from bckit import BC, MONDAY_10_PT, NAME_SEARCH, build, entries

from portalq.jobs.clock import FrozenClock, set_clock
from portalq.jobs.errors import BusinessError, PortalClosed, RetryableError, UncertainOutcome
from portalq.jobs.waiting import WaitOnPortal
from portalq.portals.bc.flow import name_search
from tests.checkpoints import record, state

pytestmark = pytest.mark.browser


def nr_ctx(make_ctx, traced=False, **overrides):
    """Traced per playwright.config only where asked: tracing is tested elsewhere and costs."""
    return make_ctx("name_search", build(NAME_SEARCH, **overrides),
                    trace_policy=None if traced else "off")


def test_name_request_end_to_end(run, portals, make_ctx):
    set_clock(FrozenClock(MONDAY_10_PT))
    ctx = nr_ctx(make_ctx, traced=True)
    result = run(name_search(ctx))

    assert re.fullmatch(r"NR \d{7}", result["nr_number"])
    # the first choice has a restricted word, the second is approved and reserved 56 days
    assert result["nr_state"] == "APPROVED"
    assert result["name"] == "Cedar Harbour Consulting Ltd."
    reserved_until = MONDAY_10_PT.astimezone(ZoneInfo("America/Vancouver")).date() + timedelta(
        days=56)
    assert result["expires_on"] == reserved_until.isoformat() == "2026-04-27"
    [entry] = entries(portals, BC, "name_request")
    assert entry["nr_number"] == result["nr_number"] and entry["fee"] == "$30.00"
    assert [d[1] for d in entry["decisions"]] == ["REJECTED", "APPROVED"]
    # names only, no contacts (the whole phone number: "604" alone can be part of an NR number)
    assert "604-555-0100" not in str(entry) and "6045550100" not in str(entry)
    assert "ann@" not in str(entry)
    cp = ctx.checkpoints
    assert state(cp, "name_request") == "confirmed" and cp["nr_number"] == result["nr_number"]
    assert record(cp, "name_request").reference == entry["reference"]
    shots = sorted(p.name for p in ctx.artifacts_dir.glob("*.png"))
    assert shots == ["01-nr-names.png", "02-nr-applicant.png", "03-nr-result.png"]


def test_rejected_names_are_a_business_error(run, portals, make_ctx):
    ctx = nr_ctx(make_ctx, names=["Royal Crown Holdings Ltd.", "Government Widgets Ltd."])
    with pytest.raises(BusinessError, match=r"NR \d{7} is REJECTED: all names were rejected"):
        run(name_search(ctx))
    assert ctx.checkpoints["nr_state"] == "REJECTED"
    assert len(entries(portals, BC, "name_request")) == 1


def test_conditional_name_needs_consent_and_retry_reuses_the_nr(run, portals, make_ctx):
    ctx = nr_ctx(make_ctx, names=["Cedar Trust Ltd."])
    with pytest.raises(BusinessError, match="CONDITIONAL.*consent letter needed"):
        run(name_search(ctx))
    number = ctx.checkpoints["nr_number"]
    # an admin retry re-reads the NR (still conditional): no second NR, no second fee
    with pytest.raises(BusinessError, match=f"{number} is CONDITIONAL"):
        run(name_search(ctx.retry()))
    [entry] = entries(portals, BC, "name_request")
    assert entry["nr_number"] == number


def test_a_name_in_use_is_rejected(run, portals, make_ctx):
    run(name_search(nr_ctx(make_ctx, names=["Cedar Harbour Consulting Ltd."])))
    with pytest.raises(BusinessError, match="REJECTED"):
        run(name_search(nr_ctx(make_ctx, names=["Cedar Harbour Consulting Ltd."])))
    decisions = [e["decisions"][0][2] for e in entries(portals, BC, "name_request")]
    assert decisions == ["", "conflicts with an existing name"]


@pytest.mark.parametrize("faults, outcome, message", [
    ({"hours": "closed"}, PortalClosed, "closed: This service is not available"),
    ({"maintenance": True}, PortalClosed, "maintenance"),
    ({"error_code": "500", "error_times": 1}, RetryableError, "system error 500"),
    ({"error_code": "SYSTEM_UNAVAILABLE", "error_times": 1}, RetryableError,
     "system error SYSTEM_UNAVAILABLE"),
    ({"expire_session": True}, RetryableError, "session expired"),
    ({"changed_selector": True}, RetryableError, "no button 'Continue'.*portal changed"),
])
def test_faults_map_to_outcomes(run, portals, make_ctx, faults, outcome, message):
    portals.control(BC, **faults)
    with pytest.raises(outcome, match=message) as info:
        run(name_search(nr_ctx(make_ctx)))
    if outcome is PortalClosed:
        assert info.value.outage == ("maintenance" in faults)
    assert portals.ledger(BC) == []


def test_unexpected_dialog_is_accepted(run, portals, make_ctx):
    portals.control(BC, dialog=True)
    assert run(name_search(nr_ctx(make_ctx)))["nr_state"] == "APPROVED"
    assert len(portals.ledger(BC)) == 1


def test_system_error_on_submit_waits_then_a_person_never_a_second_request(
        run, portals, make_ctx):
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, error_code="500", error_times=1)
    ctx = nr_ctx(make_ctx)
    with pytest.raises(RetryableError):
        run(name_search(ctx))
    assert state(ctx.checkpoints, "name_request") == "submitting" and portals.ledger(BC) == []
    # the lookup finds nothing: not conclusive for BC, so the job waits (no 2nd fee) ...
    retry = ctx.retry()
    with pytest.raises(WaitOnPortal, match="^waiting on bc_corporate_online since "):
        run(name_search(retry))
    clock.advance(hours=25)   # ... and past the declared window a person checks
    with pytest.raises(UncertainOutcome, match="was lost"):
        run(name_search(retry.retry()))
    assert portals.ledger(BC) == []


def test_dropped_answer_while_examined_later_waits_and_completes_once(run, portals, make_ctx):
    """The answer is lost right after "Submit and Pay" while the examiners keep the request
    queued for hours: the lookup finds it INPROGRESS -- a wait, not an error, never a second
    request -- and the job completes with the approved name once it is examined."""
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, drop_after_submit=True, decide_after_seconds=3 * 3600)
    ctx = nr_ctx(make_ctx, names=["Cedar Harbour Consulting Ltd."])
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(name_search(ctx))
    portals.control(BC, drop_after_submit=False)
    attempt = ctx
    for _ in range(3):
        clock.advance(minutes=40)
        attempt = attempt.retry()
        with pytest.raises(WaitOnPortal, match=r"examination of NR \d{7} \(INPROGRESS\)"):
            run(name_search(attempt))
    [entry] = entries(portals, BC, "name_request")
    assert attempt.checkpoints["nr_number"] == entry["nr_number"]
    assert attempt.checkpoints["waiting"]["checks"] == 3
    clock.advance(hours=2)
    done = attempt.retry()
    result = run(name_search(done))
    assert result["nr_state"] == "APPROVED" and result["name"] == "Cedar Harbour Consulting Ltd."
    assert result["nr_number"] == entry["nr_number"] and done.checkpoints["waiting"] is None
    [entry] = entries(portals, BC, "name_request")   # one request, one fee
    assert entry["payment"] == {"amount": "$30.00"}


@pytest.mark.parametrize("names, staff, outcome, words", [
    (["Royal Cedar Holdings Ltd."], "approve", BusinessError,
     r"REJECTED: .*Royal Cedar Holdings Ltd\.: restricted word: ROYAL"),
    (["Cedar Trust Ltd."], "approve", BusinessError, "CONDITIONAL.*consent letter needed"),
])
def test_examined_after_a_delay_rejected_or_conditional(run, portals, make_ctx, names, staff,
                                                        outcome, words):
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, decide_after_seconds=3600, staff_outcome=staff)
    ctx = nr_ctx(make_ctx, names=names)
    with pytest.raises(WaitOnPortal):
        run(name_search(ctx))
    clock.advance(hours=1, seconds=1)
    with pytest.raises(outcome, match=words):
        run(name_search(ctx.retry()))
    assert len(entries(portals, BC, "name_request")) == 1


def test_a_request_on_hold_waits_and_escalates_once_past_the_expected_time(
        run, portals, make_ctx):
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, decide_after_seconds=60, staff_outcome="hold")
    ctx = nr_ctx(make_ctx)
    attempt = ctx
    with pytest.raises(WaitOnPortal, match="INPROGRESS"):
        run(name_search(attempt))
    for hours in (2, 20, 4, 4):   # 30 h: past BC's 24 h
        clock.advance(hours=hours)
        attempt = attempt.retry()
        with pytest.raises(WaitOnPortal, match=r"\(HOLD\)"):
            run(name_search(attempt))
    assert [kind for kind, _ in ctx.told] == ["waiting"]   # once, not at every check
    assert "past the expected time" in ctx.told[0][1]
    assert len(entries(portals, BC, "name_request")) == 1


def test_answer_lost_after_submit_is_reconciled(run, portals, make_ctx):
    portals.control(BC, drop_after_submit=True)
    ctx = nr_ctx(make_ctx)
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(name_search(ctx))
    assert state(ctx.checkpoints, "name_request") == "submitting"
    assert "nr_number" not in ctx.checkpoints
    portals.control(BC, drop_after_submit=False)
    retry = ctx.retry()
    result = run(name_search(retry))
    [entry] = portals.ledger(BC)  # the request reached the registry exactly once
    assert result["nr_number"] == entry["nr_number"] == retry.checkpoints["nr_number"]
    assert result["nr_state"] == "APPROVED"


def test_slow_portal_times_out_as_retryable(run, portals, make_ctx, browser_config):
    portals.control(BC, slow_ms=1500)
    ctx = make_ctx("name_search", build(NAME_SEARCH), trace_policy="off",
                   config=browser_config.with_(navigation_ms=400, action_ms=400))
    with pytest.raises(RetryableError, match="Timeout 400ms exceeded"):
        run(name_search(ctx))
    assert portals.ledger(BC) == []

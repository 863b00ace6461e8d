"""name_search against the BC Registries Name Request stand-in, in real Chromium."""

from __future__ import annotations

import copy
import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from bckit import BC, MONDAY_10_PT, NAME_SEARCH, build, crash_after_checkpoint, entries

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
    """As namex runs it: created PENDING_PAYMENT under a temporary number, paid once (the
    real number comes with the payment), examined."""
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
    assert re.fullmatch(r"NR L\d{6}", entry["temp_number"])
    assert entry["payment"]["amount"] == "$30.00"   # one payment
    assert [d[1] for d in entry["decisions"]] == ["REJECTED", "APPROVED"]
    # names only, no contacts (the whole phone number: "604" alone can be part of an NR number)
    assert "604-555-0100" not in str(entry) and "6045550100" not in str(entry)
    assert "ann@" not in str(entry)
    cp = ctx.checkpoints
    assert state(cp, "name_request") == "confirmed" and state(cp, "nr_payment") == "confirmed"
    assert record(cp, "name_request").confirmation["nr_number"] == entry["temp_number"]
    assert record(cp, "name_request").confirmation["nr_state"] == "PENDING_PAYMENT"
    assert record(cp, "nr_payment").confirmation["nr_number"] == cp["nr_number"] == \
        result["nr_number"]
    shots = sorted(p.name for p in ctx.artifacts_dir.glob("*.png"))
    assert shots == ["01-nr-names.png", "02-nr-applicant.png", "03-nr-created.png",
                     "04-nr-paid.png"]


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


def test_no_answer_to_the_creation_asks_a_person_never_a_second_request(
        run, portals, make_ctx):
    """The NR's number comes only with the answer to its creation, and namex finds an NR
    only by its number: a lost answer cannot be looked up -- a person, never a second NR
    (after 2 minutes namex would accept one, and it would be paid)."""
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, drop_after_submit=True)
    ctx = nr_ctx(make_ctx)
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(name_search(ctx))
    assert state(ctx.checkpoints, "name_request") == "submitting"
    portals.control(BC, drop_after_submit=False)
    clock.advance(minutes=5)
    with pytest.raises(UncertainOutcome, match="cannot be looked up.*never requested again"):
        run(name_search(ctx.retry()))
    [entry] = portals.ledger(BC)   # one NR, never paid
    assert entry["namex_state"] == "PENDING_PAYMENT" and entry["payment"] is None


def test_killed_between_creation_and_payment_pays_the_same_nr_once(run, portals, make_ctx):
    set_clock(FrozenClock(MONDAY_10_PT))
    ctx = nr_ctx(make_ctx, names=["Cedar Harbour Consulting Ltd."])
    crash_after_checkpoint(ctx, portals, "confirmed:name_request", maintenance=True)
    with pytest.raises(PortalClosed):
        run(name_search(ctx))
    [entry] = portals.ledger(BC)
    assert entry["namex_state"] == "PENDING_PAYMENT" and entry["payment"] is None
    assert ctx.checkpoints["nr_number"] == entry["nr_number"] == entry["temp_number"]
    portals.control(BC, maintenance=False)
    result = run(name_search(ctx.retry()))   # found under its temporary number, then paid
    [entry] = portals.ledger(BC)
    assert result["nr_number"] == entry["nr_number"] != entry["temp_number"]
    assert result["nr_state"] == "APPROVED" and entry["payment"]["amount"] == "$30.00"


def test_no_answer_to_the_payment_never_pays_twice(run, portals, make_ctx):
    """The payment was made and its answer lost (the connection dropped after namex acted):
    the NR is no longer under its temporary number, so its payment was created -- a person,
    never a second payment."""
    set_clock(FrozenClock(MONDAY_10_PT))
    ctx = nr_ctx(make_ctx)
    crash_after_checkpoint(ctx, portals, "confirmed:name_request", drop_after_submit=True)
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(name_search(ctx))
    assert state(ctx.checkpoints, "nr_payment") == "submitting"
    portals.control(BC, drop_after_submit=False)
    with pytest.raises(UncertainOutcome, match=r"payment of NR L\d{6}.*never paid again"):
        run(name_search(ctx.retry()))
    [entry] = portals.ledger(BC)   # one NR, one payment
    assert entry["payment"]["amount"] == "$30.00" and entry["namex_state"] == "DRAFT"


def test_a_payment_that_never_reached_namex_is_made_once(run, portals, make_ctx):
    """A system error instead of the payment's answer: the NR is still under its temporary
    number (namex never created the payment), so the retry pays it -- once."""
    set_clock(FrozenClock(MONDAY_10_PT))
    ctx = nr_ctx(make_ctx)
    crash_after_checkpoint(ctx, portals, "confirmed:name_request", error_code="500",
                           error_times=1)
    with pytest.raises(RetryableError):
        run(name_search(ctx))
    assert state(ctx.checkpoints, "nr_payment") == "submitting"
    result = run(name_search(ctx.retry()))
    [entry] = portals.ledger(BC)
    assert result["nr_number"] == entry["nr_number"] and entry["payment"]["amount"] == "$30.00"


def test_paybc_refusing_keeps_the_nr_and_retries_its_payment(run, portals, make_ctx):
    set_clock(FrozenClock(MONDAY_10_PT))
    portals.control(BC, payment_down=True)
    ctx = nr_ctx(make_ctx)
    with pytest.raises(RetryableError, match=r"PayBC did not take the payment of NR \d{7}"):
        run(name_search(ctx))
    [entry] = portals.ledger(BC)   # renumbered by the payment's creation, not paid
    assert entry["namex_state"] == "PENDING_PAYMENT" and entry["payment"] is None
    assert ctx.checkpoints["nr_number"] == entry["nr_number"]
    portals.control(BC, payment_down=False)
    result = run(name_search(ctx.retry()))
    [entry] = portals.ledger(BC)
    assert result["nr_number"] == entry["nr_number"] and entry["payment"]["amount"] == "$30.00"


def test_namex_refuses_the_same_names_within_two_minutes_then_accepts_them(
        run, portals, make_ctx):
    """namex's duplicate guard protects for 2 minutes only: after them a second NR for the
    same names is accepted (and would be charged) -- which is why a job never resubmits."""
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, decide_after_seconds=3600)
    with pytest.raises(WaitOnPortal):
        run(name_search(nr_ctx(make_ctx)))
    other = nr_ctx(make_ctx)   # another job, the same names and e-mail
    with pytest.raises(RetryableError, match="already submitted.*nothing was created"):
        run(name_search(other))
    assert state(other.checkpoints, "name_request") == "refused"
    assert len(portals.ledger(BC)) == 1
    clock.advance(minutes=2, seconds=1)
    with pytest.raises(WaitOnPortal):
        run(name_search(other.retry()))
    assert len(portals.ledger(BC)) == 2


@pytest.mark.parametrize("staff, state_seen", [("approve", "DRAFT"),
                                               ("nro_updating", "NRO_UPDATING"),
                                               ("hold", "HOLD")])
def test_examination_states_are_waits(run, portals, make_ctx, staff, state_seen):
    clock = FrozenClock(MONDAY_10_PT)
    set_clock(clock)
    portals.control(BC, decide_after_seconds=60 if staff != "approve" else 3600,
                    staff_outcome=staff)
    ctx = nr_ctx(make_ctx)
    with pytest.raises(WaitOnPortal, match=r"examination of NR \d{7} \(DRAFT\)"):
        run(name_search(ctx))
    clock.advance(minutes=2)
    with pytest.raises(WaitOnPortal, match=rf"examination of NR \d{{7}} \({state_seen}\)"):
        run(name_search(ctx.retry()))
    assert len(portals.ledger(BC)) == 1


@pytest.mark.parametrize("names, outcome", [
    (["Cedar Harbour Consulting Ltd."], None),
    (["Cedar Trust Ltd."], "CONDITIONAL.*consent letter needed")])
def test_a_reserved_name_is_approved_as_its_payment_completes(run, portals, make_ctx, names,
                                                               outcome):
    """RESERVED / COND-RESERVE become APPROVED / CONDITIONAL when the payment completes
    (namex payment.py), with no examination to wait for."""
    set_clock(FrozenClock(MONDAY_10_PT))
    portals.control(BC, decide_after_seconds=3600, staff_outcome="reserve")
    ctx = nr_ctx(make_ctx, names=names)
    if outcome is None:
        assert run(name_search(ctx))["nr_state"] == "APPROVED"
    else:
        with pytest.raises(BusinessError, match=outcome):
            run(name_search(ctx))
    [entry] = portals.ledger(BC)
    assert entry["requested"] in ("RESERVED", "COND-RESERVE")


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
    with pytest.raises(WaitOnPortal, match=r"\(DRAFT\)"):
        run(name_search(attempt))
    for hours in (2, 20, 4, 4):   # 30 h: past BC's 24 h
        clock.advance(hours=hours)
        attempt = attempt.retry()
        with pytest.raises(WaitOnPortal, match=r"\(HOLD\)"):
            run(name_search(attempt))
    assert [kind for kind, _ in ctx.told] == ["waiting"]   # once, not at every check
    assert "past the expected time" in ctx.told[0][1]
    assert len(entries(portals, BC, "name_request")) == 1


def test_slow_portal_times_out_as_retryable(run, portals, make_ctx, browser_config):
    portals.control(BC, slow_ms=1500)
    ctx = make_ctx("name_search", build(NAME_SEARCH), trace_policy="off",
                   config=browser_config.with_(navigation_ms=400, action_ms=400))
    with pytest.raises(RetryableError, match="Timeout 400ms exceeded"):
        run(name_search(ctx))
    assert portals.ledger(BC) == []


def test_new_names_after_a_rejection_are_a_new_nr_created_and_paid_once(
        run, portals, make_ctx):
    """The rejected NR's creation and payment are both retired: the new names get their own
    NR, created and paid once (test first: its payment was taken as already made)."""
    set_clock(FrozenClock(MONDAY_10_PT))
    ctx = nr_ctx(make_ctx, names=["Royal Crown Holdings Ltd."])
    with pytest.raises(BusinessError, match="REJECTED"):
        run(name_search(ctx))
    # an admin patches the names (as `jobs retry --payload-patch` does) and retries
    retry = nr_ctx(make_ctx, names=["Cedar Harbour Consulting Ltd."])
    retry.job_id, retry.checkpoints = ctx.job_id, copy.deepcopy(ctx.checkpoints)
    result = run(name_search(retry))
    first, second = entries(portals, BC, "name_request")
    assert result["nr_number"] == second["nr_number"] != first["nr_number"]
    assert first["payment"] and second["payment"]   # each NR paid once
    assert retry.checkpoints["earlier_nrs"][0]["nr_number"] == first["nr_number"]

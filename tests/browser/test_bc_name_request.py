"""name_search against the BC Registries Name Request stand-in, in real Chromium."""

from __future__ import annotations

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from bckit import BC, MONDAY_10_PT, NAME_SEARCH, build, entries

from portalq.jobs.clock import FrozenClock, set_clock
from portalq.jobs.errors import BusinessError, PortalClosed, RetryableError
from portalq.portals.flows.bc import name_search
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


def test_system_error_on_submit_then_retry_submits_once(run, portals, make_ctx):
    portals.control(BC, error_code="500", error_times=1)
    ctx = nr_ctx(make_ctx)
    with pytest.raises(RetryableError):
        run(name_search(ctx))
    assert state(ctx.checkpoints, "name_request") == "submitting" and portals.ledger(BC) == []
    # the retry looks the reference up, finds nothing, and submits (same reference)
    result = run(name_search(ctx.retry()))
    [entry] = portals.ledger(BC)
    assert entry["nr_number"] == result["nr_number"]
    assert entry["reference"] == record(ctx.checkpoints, "name_request").reference


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

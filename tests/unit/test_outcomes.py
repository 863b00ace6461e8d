"""The outcome policy as a table: exception, job, portal state -> transition (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.errors import (
    BusinessError,
    DeferUntil,
    PortalClosed,
    PortalUnavailable,
    RetryableError,
    UncertainOutcome,
)
from jobs.worker_api import rescue_decision
from scheduler.outcomes import Policy, PortalState, decide, is_outage_sign
from tests import checkpoints

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
POLICY = Policy(retry_base_seconds=10, retry_cap_seconds=100, probe_seconds=60, probe_limit=3)
SUBMITTING = checkpoints.in_doubt()


def job(attempts=1, max_attempts=5, checkpoint=None, probe_failures=0):
    return {"id": 7, "portal": "irs_ein", "attempts": attempts, "max_attempts": max_attempts,
            "checkpoint": checkpoint or {}, "probe_failures": probe_failures}


def opens_at(when):
    return lambda at: max(at, when)


@pytest.mark.parametrize("exc, sign", [
    (PortalUnavailable("HTTP 503"), True),
    (PortalClosed("maintenance", outage=True), True),
    (TimeoutError(), True),
    (PortalClosed("closed tonight"), False),
    (RetryableError("Continue control not found: portal changed?"), False),
    (BusinessError("name rejected"), False),
    (KeyError("bug"), False),
])
def test_only_errors_pointing_at_the_portal_are_outage_signs(exc, sign):
    assert is_outage_sign(exc) is sign


@pytest.mark.parametrize("exc, j, status, outcome, kind, refund", [
    (RetryableError("x"), job(1), "pending", "retry", None, False),
    (PortalUnavailable("503"), job(2), "pending", "retry", None, False),
    (RetryableError("x"), job(5), "failed", "failed", "attempts", False),
    # past its point of no return, the last attempt is escalated as uncertain
    (RetryableError("x"), job(5, checkpoint=SUBMITTING), "failed", "uncertain", "uncertain",
     False),
    (BusinessError("rejected"), job(1), "failed", "business", "business", False),
    (UncertainOutcome("answer lost"), job(1), "failed", "uncertain", "uncertain", False),
    (PortalClosed("closed"), job(3), "deferred", "deferred", None, True),
    (DeferUntil("one per day", when=NOW + timedelta(hours=9)), job(1), "deferred", "deferred",
     None, True),
    (KeyError("bug"), job(1), "pending", "retry", None, False),
])
def test_transitions_of_a_running_portal(exc, j, status, outcome, kind, refund):
    t = decide(exc, j, message=str(exc), now=NOW, policy=POLICY, portal=PortalState())
    assert (t.status, t.outcome, t.refund_attempt) == (status, outcome, refund)
    assert (t.escalation[0] if t.escalation else None) == kind
    if kind == "uncertain" and j["checkpoint"]:
        assert "--confirmed-filed" in t.escalation[1] and "do not cancel" in t.escalation[1]


def test_a_reconcilable_job_past_submission_is_an_attempts_escalation_that_warns():
    t = decide(RetryableError("x"), job(5, checkpoint=SUBMITTING), message="x", now=NOW,
               policy=POLICY, portal=PortalState(), reconcilable=True)
    assert t.escalation[0] == "attempts" and "cancelling may lose a real filing" in \
        t.escalation[1]


def test_a_backoff_landing_in_closed_hours_waits_for_the_opening():
    opening = NOW + timedelta(hours=15)
    t = decide(RetryableError("x"), job(1), message="x", now=NOW, policy=POLICY,
               portal=PortalState(next_startable=opens_at(opening)))
    assert t.run_at == opening


def test_the_sign_that_trips_the_breaker_waits_for_the_probe_without_counting_a_probe():
    probe = NOW + timedelta(seconds=60)
    t = decide(PortalUnavailable("503"), job(2), message="503", now=NOW, policy=POLICY,
               portal=PortalState(paused_by="breaker", probe_at=probe, just_paused=True))
    assert (t.status, t.refund_attempt, t.probe_failed, t.run_at) == \
        ("deferred", True, False, probe)


def test_a_failed_probe_goes_behind_the_next_probe_then_is_given_up():
    probe = NOW + timedelta(seconds=60)
    state = PortalState(paused_by="breaker", probe_at=probe)
    first = decide(PortalUnavailable("503"), job(1, probe_failures=0), message="503", now=NOW,
                   policy=POLICY, portal=state)
    second = decide(PortalUnavailable("503"), job(1, probe_failures=1), message="503", now=NOW,
                    policy=POLICY, portal=state)
    assert (first.status, first.refund_attempt, first.probe_failed) == ("deferred", True, True)
    # behind the next probe (so another job is the probe), further back each time
    assert probe < first.run_at < second.run_at
    third = decide(PortalUnavailable("503"), job(1, probe_failures=2), message="503", now=NOW,
                   policy=POLICY, portal=state)
    assert (third.status, third.outcome, third.escalation[0]) == ("failed", "probe", "probe")
    assert third.refund_attempt  # the probe runs never spent its attempts
    never = decide(PortalUnavailable("503"), job(1, probe_failures=50), message="503", now=NOW,
                   policy=Policy(probe_limit=0), portal=state)
    assert never.status == "deferred"


def test_a_flow_bug_on_a_paused_portal_is_an_ordinary_retry():
    t = decide(RetryableError("control not found"), job(1), message="x", now=NOW,
               policy=POLICY, portal=PortalState(paused_by="breaker", probe_at=NOW))
    assert (t.status, t.probe_failed) == ("pending", False)


@pytest.mark.parametrize("row, reconcilable, status, kind", [
    ({"crashes": 0, "checkpoint": {}}, False, "pending", None),
    ({"crashes": 2, "checkpoint": {}}, False, "pending", None),
    ({"crashes": 3, "checkpoint": {}}, False, "failed", "crashing"),
    # past the point of no return where the portal has a lookup: reconciled next attempt
    ({"crashes": 0, "checkpoint": SUBMITTING}, True, "pending", None),
    ({"crashes": 3, "checkpoint": SUBMITTING}, True, "failed", "uncertain"),
    ({"crashes": 0, "checkpoint": SUBMITTING}, False, "failed", "uncertain"),
    # a checkpoint of the wrong shape is no point of no return (and no crash of the rescuer)
    ({"crashes": 0, "checkpoint": ["submitting"]}, False, "pending", None),
])
def test_rescue_decisions(row, reconcilable, status, kind):
    got, escalation = rescue_decision(row, reconcilable=reconcilable, crash_limit=3)
    assert (got, escalation[0] if escalation else None) == (status, kind)

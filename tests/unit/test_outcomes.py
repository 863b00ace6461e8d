"""The outcome policy as a table: exception, job, portal state -> transition (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from portalq.jobs.checkpoints import rescue_decision
from portalq.jobs.errors import (
    BusinessError,
    DeferUntil,
    PortalClosed,
    PortalUnavailable,
    RetryableError,
    UncertainOutcome,
)
from portalq.scheduler.outcomes import Policy, PortalState, decide, is_outage_sign
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


def test_a_reconcilable_job_past_submission_gets_one_lookup_then_an_attempts_escalation():
    # issue 35 item 9: its attempts spent past the submission, the job is looked up once
    # (one more attempt) before a person is asked
    in_doubt = {**SUBMITTING, "reconciled": "not_found"}
    t = decide(RetryableError("x"), job(5, checkpoint=in_doubt), message="x", now=NOW,
               policy=POLICY, portal=PortalState(), reconcilable=True)
    assert (t.status, t.escalation, t.extra_attempt) == ("pending", None, True)
    assert t.checkpoint_patch == {"lookup_granted": 6}
    assert "reconciled" in t.drop_checkpoint   # the lookup's answer predates the filing
    granted = {**in_doubt, "lookup_granted": 6}
    t = decide(RetryableError("x"), job(6, max_attempts=6, checkpoint=granted), message="x",
               now=NOW, policy=POLICY, portal=PortalState(), reconcilable=True)
    assert (t.status, t.escalation[0], t.extra_attempt) == ("failed", "attempts", False)
    assert "do not cancel" in t.escalation[1] and "reconciled" in t.drop_checkpoint
    # an admin's retry (a fresh budget) earns another lookup before the next person
    t = decide(RetryableError("x"), job(7, max_attempts=7, checkpoint=granted), message="x",
               now=NOW, policy=POLICY, portal=PortalState(), reconcilable=True)
    assert t.status == "pending" and t.checkpoint_patch == {"lookup_granted": 8}


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
    # at the crash limit past the submission: one more run looks it up (issue 35 item 9),
    # then a person is asked -- never as "uncertain", whose --not-filed skips the lookup
    ({"crashes": 3, "checkpoint": SUBMITTING}, True, "pending", None),
    ({"crashes": 4, "checkpoint": SUBMITTING}, True, "failed", "crashing"),
    ({"crashes": 0, "checkpoint": SUBMITTING}, False, "failed", "uncertain"),
    # a checkpoint of the wrong shape is no point of no return (and no crash of the rescuer)
    ({"crashes": 0, "checkpoint": ["submitting"]}, False, "pending", None),
])
def test_rescue_decisions(row, reconcilable, status, kind):
    got, escalation = rescue_decision(row, reconcilable=reconcilable, crash_limit=3)
    assert (got, escalation[0] if escalation else None) == (status, kind)


# --- the rest of the policy the worker used to hold --------------------------------------

@pytest.mark.parametrize("exc, message, error", [
    # a timeout says how long the run was let go on, not the exception's empty text
    (TimeoutError(), "TimeoutError", "timed out after 900s"),
    # an unexpected exception is named by its class (a flow bug reads as one)
    (KeyError("bug"), "'bug'", "KeyError: 'bug'"),
    # a retryable error of the flow's own is its (redacted) message as is
    (RetryableError("control not found"), "control not found", "control not found"),
    (PortalUnavailable("HTTP 503"), "HTTP 503", "HTTP 503"),
])
def test_the_error_recorded_for_a_retry(exc, message, error):
    t = decide(exc, job(1), message=message, now=NOW, policy=Policy(), portal=PortalState())
    assert (t.status, t.error) == ("pending", error)


@pytest.mark.parametrize("exc, opening, expected", [
    # a closed page without a reopening time waits for the portal's next opening
    (PortalClosed("closed"), NOW + timedelta(hours=3), NOW + timedelta(hours=3)),
    # a reopening time the page states wins over the calendar
    (PortalClosed("closed", reopen_at=NOW + timedelta(hours=1)), NOW + timedelta(hours=3),
     NOW + timedelta(hours=1)),
    # no calendar and no time: a moment later, never "now" (no busy loop)
    (PortalClosed("closed"), None, NOW + timedelta(seconds=1)),
])
def test_a_closed_page_is_deferred_to_the_opening(exc, opening, expected):
    portal = PortalState(next_startable=opens_at(opening) if opening else None)
    t = decide(exc, job(2), message="closed", now=NOW, policy=POLICY, portal=portal)
    assert (t.status, t.run_at, t.refund_attempt) == ("deferred", expected, True)
    assert t.detail == {"event": "deferred by handler", "outage": False}


def test_an_outage_sign_on_a_portal_paused_by_an_operator_waits_and_is_no_probe():
    t = decide(PortalUnavailable("503"), job(4, probe_failures=9), message="503", now=NOW,
               policy=POLICY, portal=PortalState(paused_by="operator"))
    assert (t.status, t.refund_attempt, t.probe_failed, t.escalation) == \
        ("deferred", True, False, None)
    assert t.run_at == NOW + timedelta(seconds=1)


def test_a_business_error_escalates_even_with_attempts_left_and_past_submission():
    t = decide(BusinessError("name taken"), job(1, checkpoint=SUBMITTING), message="name taken",
               now=NOW, policy=POLICY, portal=PortalState())
    assert (t.status, t.escalation) == ("failed", ("business", "name taken"))


def test_the_checkpoint_the_run_left_decides_over_the_claimed_row():
    # the claimed row had none; the run wrote "submitting" then failed its last attempt
    t = decide(RetryableError("x"), job(5), message="x", now=NOW, policy=POLICY,
               portal=PortalState(), checkpoint=SUBMITTING)
    assert t.escalation[0] == "uncertain"


def test_policy_from_settings_and_breaker_reason():
    from portalq.scheduler.config import Settings
    from portalq.scheduler.failures import policy_of
    from portalq.scheduler.outcomes import breaker_reason

    p = policy_of(Settings(retry_base_seconds=7, breaker_probe_limit=0))
    assert (p.retry_base_seconds, p.probe_limit) == (7, 0)
    assert breaker_reason(3, 300.0, "HTTP 503") == \
        "outage signs from 3 jobs within 300s; last: HTTP 503"


# --- issue 35 item 7: a long outage gives up on no healthy job -------------------------------

def test_a_run_started_before_the_pause_is_no_probe_and_is_not_charged():
    # the breaker tripped while this job ran: its failure is one more outage sign, not a
    # failed probe (it was no probe), however many probes it failed before
    probe = NOW + timedelta(seconds=60)
    t = decide(PortalUnavailable("503"), job(1, probe_failures=2), message="503", now=NOW,
               policy=POLICY, portal=PortalState(paused_by="breaker", probe_at=probe,
                                                 probe=False))
    assert (t.status, t.refund_attempt, t.probe_failed, t.escalation, t.run_at) == \
        ("deferred", True, False, None, probe)


def test_probes_failing_for_other_jobs_too_are_the_portals_reason_not_the_jobs():
    # another job failed as the probe since this job's last one: the portal is down; the
    # job waits behind the next probe, uncharged, however long the outage lasts
    probe = NOW + timedelta(seconds=60)
    state = PortalState(paused_by="breaker", probe_at=probe, others_failing=True)
    t = decide(PortalUnavailable("503"), job(1, probe_failures=2), message="503", now=NOW,
               policy=POLICY, portal=state)
    assert (t.status, t.refund_attempt, t.probe_failed, t.escalation) == \
        ("deferred", True, False, None)
    assert t.run_at > probe   # behind the next probe: another job is the next probe
    # the same job failing probe after probe with no other job failing: its own fault
    alone = decide(PortalUnavailable("503"), job(1, probe_failures=2), message="503",
                   now=NOW, policy=POLICY,
                   portal=PortalState(paused_by="breaker", probe_at=probe))
    assert (alone.status, alone.escalation[0]) == ("failed", "probe")


def test_a_lone_probe_failing_while_the_landing_page_is_down_is_the_portals_outage():
    # issue 48: the only job left on a paused portal failed probe after probe while the
    # portal was down, and was given up "while other jobs waited" (none did)
    probe = NOW + timedelta(seconds=60)
    down = decide(PortalUnavailable("503"), job(1, probe_failures=2), message="503",
                  now=NOW, policy=POLICY,
                  portal=PortalState(paused_by="breaker", probe_at=probe, landing_down=True))
    assert (down.status, down.refund_attempt, down.probe_failed, down.escalation) == \
        ("deferred", True, False, None)
    assert down.detail is not None and down.detail["landing_down"] is True
    # the landing page answers, yet the job fails probe after probe: its own trouble,
    # and the escalation says what was seen, not "while other jobs waited"
    up = decide(PortalUnavailable("503"), job(1, probe_failures=2), message="503",
                now=NOW, policy=POLICY, portal=PortalState(paused_by="breaker", probe_at=probe))
    assert (up.status, up.escalation[0]) == ("failed", "probe")
    assert "other jobs waited" not in up.escalation[1]
    assert "no other job failing meanwhile" in up.escalation[1]

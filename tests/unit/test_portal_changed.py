"""A page the flow does not know (issue 37): the outcome policy's answer, and the page's aria
snapshot with the data left out (no database, no browser)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from portalq.jobs.errors import PortalChanged, RetryableError
from portalq.portals.flows.drift import leave_data_out, payload_values
from portalq.scheduler.outcomes import Policy, PortalState, decide, is_outage_sign
from tests import checkpoints

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
CHANGED = PortalChanged("IRS review page differs — portal changed?", where="the review")


def job(attempts=1, checkpoint=None):
    return {"id": 7, "portal": "irs_ein", "job_type": "obtain_ein", "attempts": attempts,
            "max_attempts": 5,
            "checkpoint": checkpoint or {}, "probe_failures": 0}


@pytest.mark.parametrize("attempts", [1, 5])   # even on its last attempt
def test_the_failure_that_paused_the_portal_waits_unspent_with_the_one_escalation(attempts):
    t = decide(CHANGED, job(attempts), message=str(CHANGED), now=NOW, policy=Policy(),
               portal=PortalState(drift_paused=True))
    assert (t.status, t.outcome, t.refund_attempt) == ("deferred", "deferred", True)
    assert t.escalation is not None and t.escalation[0] == "portal_changed"
    assert "portalq portals resume irs_ein --reason" in t.escalation[1]
    assert "at the review" in t.escalation[1]
    assert "Its obtain_ein jobs are held" in t.escalation[1]   # the job type, not the portal


def test_a_job_meeting_a_portal_paused_already_waits_without_another_escalation():
    t = decide(CHANGED, job(), message="m", now=NOW, policy=Policy(),
               portal=PortalState(drift_paused=False))
    assert (t.status, t.refund_attempt, t.escalation) == ("deferred", True, None)


@pytest.mark.parametrize("reconcilable, status, kind", [
    (False, "failed", "uncertain"),      # the IRS: no lookup, never sent again blindly
    (True, "deferred", "portal_changed"),  # a lookup reconciles once the portal resumes
])
def test_past_the_point_of_no_return(reconcilable, status, kind):
    t = decide(CHANGED, job(checkpoint=checkpoints.in_doubt()), message="m", now=NOW,
               policy=Policy(), portal=PortalState(drift_paused=True),
               reconcilable=reconcilable)
    assert t.status == status and t.escalation is not None and t.escalation[0] == kind


def test_a_changed_portal_is_no_outage_sign_yet_still_retryable_for_the_flows():
    assert not is_outage_sign(CHANGED) and isinstance(CHANGED, RetryableError)


def test_the_page_snapshot_leaves_the_data_out():
    payload = {"legal_name": "Widgets LLC", "letter": "digital", "state": "DE",
               "responsible_party": {"last_name": "Lovelace", "ssn": "123-45-6789"}}
    snapshot = ("- term: Legal name\n- definition: Widgets LLC\n"
                '- radio "Receive letter digitally"\n- text: Hello Lovelace, 123-45-6789\n'
                '- textbox "Name": Widgets LLC\n- text: 987-65-4321 DE')
    out = leave_data_out(snapshot, payload_values(payload), ["123-45-6789"])
    assert out == ("- term: Legal name\n- definition: (data)\n"
                   '- radio "Receive letter digitally"\n- text: Hello ***, ***\n'
                   '- textbox "Name": ***\n- text: *** DE')

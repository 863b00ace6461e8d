"""Issue 35 item 9: an escalation mail never offers cancel for a job that may be filed."""

from __future__ import annotations

import pytest

from portalq.scheduler.config import Settings
from portalq.scheduler.mailer import build_escalation
from tests import checkpoints


def esc(kind, checkpoint):
    return {"id": 1, "job_id": 7, "job_type": "file_entity", "order_id": "O-7",
            "portal": "delaware_icis", "kind": kind, "reason": "r", "attempts": 5,
            "max_attempts": 5, "last_error": "x", "checkpoint": checkpoint}


def to_act(message):
    return message.get_body(("plain",)).get_content().split("To act:", 1)[1]


@pytest.mark.parametrize("kind", ["attempts", "crashing"])
def test_a_job_past_its_submission_is_offered_a_retry_never_a_cancel(kind):
    act = to_act(build_escalation(Settings(), esc(kind, checkpoints.in_doubt()), None))
    assert "portalq jobs retry 7" in act and "looks the filing up" in act
    assert "cancel" not in act


def test_a_job_before_its_submission_may_still_be_cancelled():
    act = to_act(build_escalation(Settings(), esc("attempts", {}), None))
    assert "portalq jobs cancel 7" in act

"""An approval request's record: whether the data changed since an earlier approval must
survive the run that asked being interrupted and run again (a crash or a fenced run after it
recorded the request, before the job was deferred)."""

from __future__ import annotations

from portalq.jobs.operations import approvals


def test_changed_since_an_approval_is_kept_when_the_request_is_recorded_again():
    approved = {"approval": {"state": "approved", "digest": "old"}}
    first = approvals.pending(approved, "new")
    assert first["changed"] is True
    again = approvals.pending({"approval": first}, "new")   # the same run, once more
    assert again["changed"] is True and again["digest"] == "new"


def test_a_first_request_is_not_a_change():
    assert approvals.pending(None, "d")["changed"] is False
    assert approvals.pending({"approval": approvals.pending(None, "d")}, "d")["changed"] is False

"""What a job's checkpoints say about its filing, and what a crashed run becomes (pure:
no database). The rescuer (``worker_api.rescue_stale``) and the outcome policy
(``scheduler.outcomes``) both decide from here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from portalq.jobs import submission
from portalq.jobs.kinds import EscalationKind as Esc
from portalq.jobs.kinds import JobStatus


def past_point_of_no_return(checkpoint: Any) -> bool:
    """Did the job's flow start a submission it has not seen confirmed (the submission
    protocol's record, jobs/submission.py -- nothing else decides it)?"""
    return isinstance(checkpoint, Mapping) and bool(submission.in_doubt(checkpoint))


def rescue_decision(row: Mapping[str, Any], *, reconcilable: bool,
                    crash_limit: int) -> tuple[JobStatus, tuple[Esc, str] | None]:
    """(new status, escalation) for a running job whose worker died. A crash is not the
    job's fault: its attempt is refunded (by the ``rescue`` query) up to ``crash_limit``
    crashes, then the job is escalated as "crashing". Past its point of no return it is
    reconciled by its next attempt where the portal allows a lookup (a lookup is not a
    filing), whatever its attempt count; where it does not, a human decides."""
    crashes = int(row.get("crashes") or 0) + 1
    past = past_point_of_no_return(row["checkpoint"])
    if past and not reconcilable:
        return JobStatus.FAILED, (Esc.UNCERTAIN,
                                  "worker lost after submitting; the portal offers no lookup: "
                                  "check the portal, then --confirmed-filed or --not-filed; "
                                  "do not cancel or retry blindly")
    if crashes > crash_limit:
        if past:
            return JobStatus.FAILED, (Esc.UNCERTAIN,
                                      f"its worker died {crashes} times, the last after "
                                      "submitting: check the portal, then --confirmed-filed "
                                      "or --not-filed")
        return JobStatus.FAILED, (Esc.CRASHING,
                                  f"its worker died {crashes} times while running it "
                                  f"(crash limit {crash_limit}): look for what kills it")
    return JobStatus.PENDING, None

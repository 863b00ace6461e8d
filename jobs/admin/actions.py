"""The console's writes: each one the queue's own admin function (the ones ``portalq jobs``
and ``portalq portals`` call) plus its audit row, in one transaction — the change and its
record commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from portalq.jobs import audit, clock, queue
from portalq.jobs.audit import Actor
from portalq.jobs.checkpoints import past_point_of_no_return
from portalq.jobs.db import sql
from portalq.jobs.errors import IllegalTransition, InputError, JobNotFound
from portalq.jobs.kinds import JobStatus
from portalq.jobs.operations import approvals, portal_rows, questions
from portalq.jobs.rows import PortalState
from portalq.jobs.secrets import redaction

#: states from which each bulk action can act
BULK_STATES = {"retry": (JobStatus.FAILED, JobStatus.CANCELLED),
               "cancel": (JobStatus.PENDING, JobStatus.DEFERRED, JobStatus.FAILED),
               # uncertain filings a person found not filed (the "Needs you" page's group of
               # one outage): each resumes from before its submission
               "not_filed": (JobStatus.FAILED,)}
BULK_CAP = 10_000


def _snapshot(conn: Any, job_id: int) -> dict[str, Any]:
    job = queue.get_job(job_id, conn)
    public = redaction.public_job(job)
    return {k: public.get(k) for k in ("status", "attempts", "max_attempts", "payload",
                                       "checkpoint", "result", "run_at")}


def _job_action(conn: Any, actor: Actor, action: str, job_id: int, reason: str,
                change: Any) -> None:
    if not reason or not reason.strip():
        raise InputError("a reason is required")
    with conn.transaction():
        before = _snapshot(conn, job_id)
        change()
        audit.record(conn, actor, action, f"job:{job_id}", redaction.scrub_ssn_like(reason),
                     before=before,
                     after=_snapshot(conn, job_id))


def job_action(conn: Any, actor: Actor, action: str, job_id: int, reason: str,
               change: Any) -> None:
    """Any admin change of one job with its audit row, in one transaction (the CLI's)."""
    _job_action(conn, actor, action, job_id, reason, change)


def retry(conn: Any, actor: Actor, job_id: int, reason: str) -> None:
    _job_action(conn, actor, "job.retry", job_id, reason, lambda: queue.retry(
        job_id, actor=actor.name, note=reason, conn=conn))


def retry_with_payload(conn: Any, actor: Actor, job_id: int, reason: str,
                       edited: Mapping[str, Any]) -> list[str]:
    """Retry with an edited payload (secret fields left at the mask keep their value);
    validated by the job type's schema before anything is written. Returns the changed
    top-level keys."""
    job = queue.get_job(job_id, conn)
    new = redaction.unmask_edit(job["job_type"], job["payload"], edited)
    patch = redaction.merge_patch(job["payload"], new)
    if not patch:
        raise InputError("the payload is unchanged (use retry)")
    _job_action(conn, actor, "job.retry_with_payload", job_id, reason, lambda: queue.retry(
        job_id, payload_patch=patch, actor=actor.name, note=reason, conn=conn))
    return sorted(patch)


#: why cancelling a failed job past its point of no return needs a person's word
UNCERTAIN_CANCEL = ("a job to cancel failed after its submission was sent: the portal may "
                    "have filed it, and cancelling loses that filing here. Check the portal "
                    "first; cancel only once the portal was checked (tick the box)")


def cancel(conn: Any, actor: Actor, job_id: int, reason: str, *,
           portal_checked: bool = True) -> None:
    """Cancel one job; one in doubt (failed past its point of no return, the submission
    perhaps filed) only with ``portal_checked`` (the console's tick: the escalation mail
    warns that cancelling it may lose a real filing)."""
    if not portal_checked:
        job = queue.get_job(job_id, conn)
        if job["status"] == "failed" and past_point_of_no_return(job["checkpoint"]):
            raise InputError(UNCERTAIN_CANCEL)
    _job_action(conn, actor, "job.cancel", job_id, reason, lambda: queue.cancel(
        job_id, actor=actor.name, conn=conn))


def confirm_filed(conn: Any, actor: Actor, job_id: int, reason: str, confirmation: str,
                  ) -> None:
    _job_action(conn, actor, "job.confirm_filed", job_id, reason, lambda: queue.resolve_filed(
        job_id, confirmation, actor=actor.name, note=reason, conn=conn))


def not_filed(conn: Any, actor: Actor, job_id: int, reason: str) -> None:
    _job_action(conn, actor, "job.not_filed", job_id, reason, lambda: queue.resolve_not_filed(
        job_id, actor=actor.name, note=reason, conn=conn))


def bulk(conn: Any, actor: Actor, action: str, ids: list[int], reason: str,
         *, scope: Mapping[str, Any], portal_checked: bool = True) -> dict[str, list[int]]:
    """Retry or cancel each of ``ids`` that its state allows, in one transaction with one
    audit row (the ids done and skipped, and the selection or filter it came from). A
    cancel that takes in a filing in doubt needs ``portal_checked``, as :func:`cancel`."""
    if action not in BULK_STATES:
        raise InputError(f"unknown bulk action {action!r}")
    if not reason or not reason.strip():
        raise InputError("a reason is required")
    if len(ids) > BULK_CAP:
        raise InputError(f"at most {BULK_CAP} jobs per bulk action")
    if action == "cancel" and not portal_checked and in_doubt(conn, ids):
        raise InputError(UNCERTAIN_CANCEL)
    done: list[int] = []
    skipped: list[int] = []
    changes: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    with conn.transaction():
        for job_id in ids:
            try:
                with conn.transaction():  # a job that changed meanwhile is skipped alone
                    before = _brief(conn, job_id)
                    if action == "retry":
                        queue.retry(job_id, actor=actor.name, note=reason, conn=conn)
                    elif action == "not_filed":
                        queue.resolve_not_filed(job_id, actor=actor.name, note=reason,
                                                conn=conn)
                    else:
                        queue.cancel(job_id, actor=actor.name, conn=conn)
                    changes.append((job_id, before, _brief(conn, job_id)))
                done.append(job_id)
            except (IllegalTransition, JobNotFound):
                skipped.append(job_id)
        bulk_id = audit.record(conn, actor, f"jobs.bulk_{action}", "jobs:bulk", reason,
                               before={"scope": dict(scope), "requested": len(ids)},
                               after={"done": done, "skipped": skipped})
        # and each job its own entry, as its own action would write (its page's audit log
        # lists it), naming the bulk action it was part of
        for job_id, before, after in changes:
            audit.record(conn, actor, f"job.{action}", f"job:{job_id}", reason,
                         before=before, after={**after, "bulk": bulk_id})
    return {"done": done, "skipped": skipped}


def in_doubt(conn: Any, ids: list[int]) -> list[int]:
    """Those of ``ids`` that are failed past their point of no return (what a bulk
    "not filed" can act on)."""
    out = []
    for job_id in ids:
        job = queue.get_job(job_id, conn)
        if job["status"] == "failed" and past_point_of_no_return(job["checkpoint"]):
            out.append(job_id)
    return out


def _brief(conn: Any, job_id: int) -> dict[str, Any]:
    """A job's state for a bulk action's entry of it: its status and attempts (what the
    action changes), not the whole masked payload ten thousand times."""
    job = queue.get_job(job_id, conn)
    return {k: job[k] for k in ("status", "attempts", "max_attempts", "run_at")}


# -- portals ---------------------------------------------------------------------------------
def _portal_state(conn: Any, code: str) -> PortalState:
    found = portal_rows.state(conn, code)
    if found is None:
        raise InputError(f"unknown portal {code!r}")
    return found


def pause_portal(conn: Any, actor: Actor, code: str, reason: str) -> None:
    with conn.transaction():
        before = _portal_state(conn, code)
        if not queue.pause_portal(code, reason=reason.strip() or "operator", conn=conn):
            raise IllegalTransition(f"{code} is already paused")
        audit.record(conn, actor, "portal.pause", f"portal:{code}", reason, before=before,
                     after=_portal_state(conn, code))


def resume_portal(conn: Any, actor: Actor, code: str, reason: str) -> None:
    with conn.transaction():
        before = _portal_state(conn, code)
        if not queue.resume_portal(code, conn=conn):
            raise IllegalTransition(f"{code} is not paused")
        audit.record(conn, actor, "portal.resume", f"portal:{code}", reason, before=before,
                     after=_portal_state(conn, code))


def add_closure(conn: Any, actor: Actor, code: str, starts: datetime, ends: datetime,
                reason: str) -> int:
    """A one-off closure (what ``portalq portals close`` records)."""
    if ends <= starts:
        raise InputError("a closure must end after it starts")
    with conn.transaction():
        _portal_state(conn, code)
        closure = portal_rows.add_closure(conn, code, starts, ends, reason.strip())
        audit.record(conn, actor, "portal.close", f"portal:{code}", reason, before=None,
                     after={"closure": closure, "from": starts, "to": ends})
        return closure


def remove_closure(conn: Any, actor: Actor, code: str, closure_id: int, reason: str) -> None:
    with conn.transaction():
        _portal_state(conn, code)
        row = portal_rows.remove_closure(conn, code, closure_id)
        if row is None:
            raise InputError(f"no closure {closure_id} of {code}")
        audit.record(conn, actor, "portal.reopen", f"portal:{code}", reason,
                     before={"closure": row["id"], "from": row["starts_at"],
                             "to": row["ends_at"], "reason": row["reason"]}, after=None)


def set_hours(conn: Any, actor: Actor, code: str, windows: list[tuple[int, Any, Any]],
              reason: str) -> None:
    """Replace a portal's weekly hours with ``windows`` ((weekday, opens, closes), parsed
    by the caller as ``portalq portals set-hours`` parses them)."""
    with conn.transaction():
        _portal_state(conn, code)
        before = portal_rows.hours(conn, code)
        portal_rows.set_hours(conn, code, windows)
        audit.record(conn, actor, "portal.set_hours", f"portal:{code}", reason,
                     before={"hours": before}, after={"hours": windows})


# -- escalations -----------------------------------------------------------------------------
def escalation(conn: Any, actor: Actor, escalation_id: int, what: str, reason: str) -> None:
    """``acknowledge``, ``assign`` (to the actor) or ``resolve`` an escalation."""
    if what not in ("acknowledge", "assign", "resolve"):
        raise InputError(f"unknown escalation action {what!r}")
    with conn.transaction():
        row = sql.fetch_one(conn, "console_escalation", {"id": escalation_id})
        if row is None:
            raise InputError(f"no escalation {escalation_id}")
        if row["resolved_at"] is not None:
            raise IllegalTransition(f"escalation {escalation_id} is resolved")
        state = {k: row[k] for k in ("acknowledged_at", "acknowledged_by", "assigned_to",
                                     "resolved_at", "resolved_by")}
        new = dict(state)
        now = clock.now()
        if what == "acknowledge" or new["acknowledged_at"] is None:
            new["acknowledged_at"], new["acknowledged_by"] = now, actor.name
        if what == "assign":
            new["assigned_to"] = actor.name
        if what == "resolve":
            new["resolved_at"], new["resolved_by"] = now, actor.name
        sql.fetch(conn, "console_escalation_set", {"id": escalation_id, "now": now, **new})
        audit.record(conn, actor, f"escalation.{what}", f"job:{row['job_id']}", reason,
                     before={"escalation": escalation_id, **state},
                     after={"escalation": escalation_id, **new})


def answer(conn: Any, actor: Actor, job_id: int, text: str, reason: str) -> None:
    """Deliver an answer (an e-mailed code, a CAPTCHA's text) to the job's open question.
    The answer is sealed at rest and is in no audit row, page or log."""
    _job_action(conn, actor, "job.answer", job_id, reason,
                lambda: questions.answer(conn, job_id, text, by=actor.name))


def decide(conn: Any, actor: Actor, job_id: int, state: str, reason: str) -> None:
    """Approve (runs again at once, submits what was reviewed) or reject (cancelled,
    nothing filed) a job waiting for approval; audited by :func:`approvals.decide`."""
    if not reason or not reason.strip():
        raise InputError("a reason is required")
    approvals.decide(conn, actor, job_id, state, reason)

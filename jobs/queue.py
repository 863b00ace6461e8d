"""The queue's synchronous API: enqueue (:mod:`jobs.enqueue`), inspect, cancel, admin
retry, rescue, deferral, pruning. The worker's async side is :mod:`jobs.worker_api`.

``conn`` may be a psycopg ``Connection``, a SQLAlchemy ``Connection`` or ``Session`` (the
statement then runs inside *its* transaction: the job exists iff that commits), or
``None`` (a connection of portalq's own, committed before returning): :mod:`jobs.db.txn`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import psycopg
from psycopg.types.json import Jsonb

from portalq.jobs import clock, limits, submission, waiting
from portalq.jobs.db import sql
from portalq.jobs.db.txn import connect, raw_connection
from portalq.jobs.db.txn import use as _use
from portalq.jobs.enqueue import COPY_MIN, Enqueued, NewJob, enqueue, enqueue_many, rate_key_for
from portalq.jobs.errors import IllegalTransition, InputError, JobNotFound
from portalq.jobs.kinds import EventKind, JobStatus
from portalq.jobs.operations import portal_rows as portals_repo
from portalq.jobs.rows import JobDetail, JobListRow, JobRow
from portalq.jobs.secrets import sealing as secrets_at_rest

__all__ = ["ACTIVE", "COPY_MIN", "Enqueued", "NewJob", "connect", "enqueue", "enqueue_many",
           "raw_connection", "rate_key_for"]

ACTIVE = ("pending", "deferred", "running")


def _known_portals(conn: psycopg.Connection[Any]) -> set[str]:
    return {row["code"] for row in sql.fetch(conn, "list_portals")}


def _job_id(job_id: Any) -> int:
    checked: int = limits.check_job_id(job_id)
    if not -(2**63) <= checked < 2**63:
        raise JobNotFound(f"no job with id {checked}")
    return checked


# -- inspection ---------------------------------------------------------------------------
def get_job(job_id: int, conn: Any = None) -> JobRow:
    job_id = _job_id(job_id)
    with _use(conn) as c:
        row = sql.fetch_one(c, "get_job", {"id": job_id})
        if row is None:
            raise JobNotFound(f"no job with id {job_id}")
        return cast(JobRow, row)


def show_job(job_id: int, conn: Any = None) -> JobDetail:
    """The job with its events, artifacts and stored documents."""
    job_id = _job_id(job_id)
    with _use(conn) as c:
        return JobDetail(**get_job(job_id, c),
                         events=sql.fetch(c, "job_events", {"id": job_id}),
                         artifacts=sql.fetch(c, "job_artifacts", {"id": job_id}),
                         documents=sql.fetch(c, "document_names", {"job_id": job_id}))


def list_jobs(*, status: str | None = None, portal: str | None = None,
              order_id: str | None = None, limit: int = 100, conn: Any = None,
              ) -> list[JobListRow]:
    limit = limits.check_list_limit(limit)
    portal = limits.check_optional_filter(portal, "portal")
    order_id = limits.check_optional_filter(order_id, "order id")
    statuses = [s.value for s in JobStatus]
    if status is not None and status not in statuses:
        raise InputError(f"unknown status {status!r} (one of {', '.join(statuses)})")
    with _use(conn) as c:
        return cast("list[JobListRow]", sql.fetch(c, "list_jobs", {
            "status": status, "portal": portal, "order_id": order_id, "limit": limit}))


def list_waiting(*, portal: str | None = None, order_id: str | None = None,
                 limit: int = 100, conn: Any = None) -> list[dict[str, Any]]:
    """The jobs waiting on their portal's decision (deferred with a ``waiting`` marker),
    expected soonest first: each with since when, expected by when, its next check and
    whether it is past the expected time (``overdue``)."""
    limit = limits.check_list_limit(limit)
    portal = limits.check_optional_filter(portal, "portal")
    order_id = limits.check_optional_filter(order_id, "order id")
    with _use(conn) as c:
        rows = sql.fetch(c, "list_jobs_waiting", {"portal": portal, "order_id": order_id,
                                                  "limit": limit})
    now = clock.now()
    out = []
    for r in rows:
        mark = waiting.marker({waiting.KEY: r.pop("waiting")})
        if mark is None:      # a marker without its portal: not one jobs.waiting writes
            continue
        out.append({**r, **{k: mark.get(k) for k in (
            "since", "expected_by", "next_check", "checks", "what", "submission")},
            "overdue": waiting.overdue(mark, now)})
    return out


# -- admin transitions --------------------------------------------------------------------
def cancel(job_id: int, *, actor: str = "admin", conn: Any = None) -> None:
    job_id = _job_id(job_id)
    with _use(conn) as c:
        job = sql.fetch_one(c, "get_job_for_update", {"id": job_id})
        if job is None:
            raise JobNotFound(f"no job with id {job_id}")
        if not sql.fetch(c, "cancel", {"id": job_id, "now": clock.now(), "actor": actor,
                                       "from": job["status"]}):
            raise IllegalTransition(f"job {job_id} is {job['status']}: only pending, deferred "
                                    "or failed jobs can be cancelled")


def retry(job_id: int, *, payload_patch: Mapping[str, Any] | None = None,
          checkpoint_patch: Mapping[str, Any] | None = None,
          drop_checkpoints: Sequence[str] = (), actor: str = "admin",
          note: str | None = None, extra_attempts: int = 5, conn: Any = None) -> None:
    """Admin retry of a failed/cancelled job: back to pending, checkpoints kept.

    ``payload_patch`` is merged into the payload (JSON merge, top level and nested
    objects) and validated against the job type's schema before anything is written.
    """
    job_id = _job_id(job_id)
    limits.check_int(extra_attempts, "extra attempts", 1, 100)
    if payload_patch is not None:
        if not isinstance(payload_patch, Mapping):
            raise InputError("a payload patch must be a JSON object")
        limits.check_payload_strings(payload_patch, "payload patch")
    if note is not None:
        limits.check_text(note, "note")
    with _use(conn) as c:
        job = sql.fetch_one(c, "get_job_for_update", {"id": job_id})
        if job is None:
            raise JobNotFound(f"no job with id {job_id}")
        if job["status"] not in (JobStatus.FAILED, JobStatus.CANCELLED):
            raise IllegalTransition(f"job {job_id} is {job['status']}: only failed or "
                                    "cancelled jobs can be retried")
        detail: dict[str, Any] = {"event": EventKind.ADMIN_RETRY}
        # an erased secret must be given again; a patch is validated and sealed anew
        stored = secrets_at_rest.for_retry(job, payload_patch, _merge) or {
            "payload": None, "secret_key_id": None, "secret_dek": None, "secret_data": None}
        if payload_patch:
            if stored["payload"] is not None:
                limits.check_payload_size(stored["payload"], "patched payload")
            detail["payload_changed"] = sorted(payload_patch)
        if checkpoint_patch or drop_checkpoints:
            detail["checkpoint_changed"] = sorted({*(checkpoint_patch or {}), *drop_checkpoints})
        if note:
            detail["note"] = note
        sql.fetch(c, "admin_retry", {
            "id": job_id, "now": clock.now(), "actor": actor, "from": job["status"],
            "extra_attempts": extra_attempts, **stored,
            "checkpoint": Jsonb(dict(checkpoint_patch or {})),
            "drop_checkpoint": list(drop_checkpoints), "detail": Jsonb(detail)})
        sql.fetch(c, "notify", {"reason": "retry"})


def resolve_not_filed(job_id: int, *, actor: str = "admin", note: str | None = None,
                      conn: Any = None) -> None:
    """An admin checked the portal: the uncertain submission did NOT arrive. The job
    resumes from just before its point of no return (earlier checkpoints kept)."""
    job = get_job(job_id, conn)
    if not submission.in_doubt(job["checkpoint"]):
        raise IllegalTransition(f"job {job_id} has no unconfirmed submission to resolve")
    patch = submission.resolved(job["checkpoint"], submission.State.NOT_FILED, clock.now(),
                                by=actor)
    retry(job_id, checkpoint_patch={**patch, "resolved": "not_filed"},
          actor=actor, note=note or "admin: not filed", conn=conn)


def resolve_filed(job_id: int, confirmation: str, *, actor: str = "admin",
                  note: str | None = None, conn: Any = None) -> None:
    """An admin found the uncertain submission on the portal: completed with its number."""
    job_id = _job_id(job_id)
    confirmation = limits.check_identifier(confirmation, "confirmation number", 200)
    if note is not None:
        limits.check_text(note, "note")
    with _use(conn) as c:
        job = sql.fetch_one(c, "get_job_for_update", {"id": job_id})
        if job is None:
            raise JobNotFound(f"no job with id {job_id}")
        if job["status"] != JobStatus.FAILED:
            raise IllegalTransition(f"job {job_id} is {job['status']}: only failed jobs can "
                                    "be confirmed as filed")
        # what the portal had confirmed before the person was asked (Delaware's service
        # request and the name as filed) stays in the result: the order's next steps read it
        earlier = {k: v for r in submission.records(job["checkpoint"]).values()
                   if r.state is submission.State.CONFIRMED for k, v in r.confirmation.items()}
        result = {**earlier, **(job["result"] or {}), "confirmation": confirmation.strip(),
                  "confirmed_by": actor}
        sql.fetch(c, "admin_complete", {
            "id": job_id, "result": Jsonb(result), "now": clock.now(), "actor": actor,
            "detail": Jsonb({"event": EventKind.ADMIN_CONFIRMED_FILED, "note": note or ""})})
        from portalq.jobs.business import order_runs  # the steps after it, if it is an order's

        order_runs.release_ready([job["order_id"]], conn=c)


def _merge(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def escalate(c: psycopg.Connection[Any], job_id: int, attempt: int, kind: str,
             reason: str) -> int | None:
    """Record an escalation (in the caller's transaction); None if it already exists."""
    row = sql.fetch_one(c, "insert_escalation", {"job_id": job_id, "attempt": attempt,
                                                 "kind": kind, "reason": reason,
                                                 "now": clock.now()})
    return row["id"] if row else None


# -- operator pause / resume of a portal ----------------------------------------------------
def pause_portal(portal: str, *, reason: str, conn: Any = None) -> bool:
    """Pause a portal until an operator resumes it; False if it was already paused."""
    portal = limits.check_identifier(portal, "portal", 100)
    reason = limits.check_identifier(reason, "reason", 500)
    with _use(conn) as c:
        if portal not in _known_portals(c):
            raise InputError(f"unknown portal {portal!r}")
        return portals_repo.pause(c, portal, by="operator", reason=reason)


def resume_portal(portal: str, *, conn: Any = None) -> bool:
    portal = limits.check_identifier(portal, "portal", 100)
    with _use(conn) as c:
        if portal not in _known_portals(c):
            raise InputError(f"unknown portal {portal!r}")
        return portals_repo.resume(c, portal)

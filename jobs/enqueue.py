"""Enqueueing: every job of a batch validated (jobs.limits, its type's schema) before
anything is written, then written by one of the paths of :mod:`jobs.enqueue_paths` (one
INSERT, or for a large batch without idempotency keys one binary COPY), its secrets sealed
bound to its id (jobs.secrets_at_rest).

``conn`` as everywhere in the queue's API (:mod:`jobs.db.txn`): the caller's connection (the
job exists iff its transaction commits) or ``None`` (one of portalq's own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from portalq.jobs import clock, limits, types
from portalq.jobs import enqueue_paths as paths
from portalq.jobs.db.txn import use as _use
from portalq.jobs.enqueue_paths import COPY_MIN
from portalq.jobs.errors import BatchInputError, InputError
from portalq.jobs.secrets import crypto
from portalq.jobs.secrets import sealing as secrets_at_rest

__all__ = ["COPY_MIN", "Enqueued", "NewJob", "enqueue", "enqueue_many", "rate_key_for"]


@dataclass
class NewJob:
    job_type: str
    order_id: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    run_at: datetime | None = None
    priority: int = 0
    max_attempts: int = 5
    idempotency_key: str | None = None
    portal: str | None = None


@dataclass(frozen=True)
class Enqueued:
    id: int
    created: bool  # False: an existing job with the same idempotency key


def rate_key_for(jt: types.JobType, payload: Mapping[str, Any]) -> str | None:
    """The per-key rate-limit key, an HMAC under a secret key: it may be personal data (an
    SSN), which a bare hash would give back to anyone trying the billion SSNs."""
    if jt.rate_limit is None:
        return None
    raw = jt.rate_limit.key(payload)
    if not raw:
        return None
    return crypto.keyed_hash(f"{jt.name}:{raw}")


def _validate(job: NewJob, max_bytes: int, known: dict[str, types.JobType]) -> dict[str, Any]:
    """One job's row, every field checked (jobs.limits) before anything is written.
    ``known``: the batch's job types already looked up (one registry look-up, with its
    plugin check, per type and batch instead of per job)."""
    if not isinstance(job.job_type, str):
        raise InputError("job type must be a string")
    order_id = limits.check_identifier(job.order_id, "order id", limits.MAX_ORDER_ID)
    max_attempts = limits.check_int(job.max_attempts, "max attempts", 1, 100)
    priority = limits.check_int(job.priority, "priority", -100, 100)
    run_at = limits.check_run_at(job.run_at)
    key = job.idempotency_key
    if key is not None:
        key = limits.check_identifier(key, "idempotency key", limits.MAX_IDEMPOTENCY_KEY)
    requested = job.portal
    if requested is not None:
        requested = limits.check_identifier(requested, "portal", 100)
    jt = known.get(job.job_type)
    if jt is None:   # an unknown type first: it names the problem best
        jt = known[job.job_type] = types.get(job.job_type)
    if isinstance(job.payload, Mapping):
        limits.check_payload_strings(job.payload)
    model = types.validate(jt, job.payload)
    portal = jt.choose_portal(model, requested)
    secrets: bytes | None = None
    if jt.secret_fields:
        # one dump: the rate key reads it whole, then the secrets are taken out of it (the
        # size checked is that of both stored parts); sealed once the job's id is known
        normal = types.normalised(model)
        rate_key = rate_key_for(jt, normal) if jt.rate_limit else None
        payload, secrets = secrets_at_rest.take_secrets(jt, normal)
    else:
        payload = types.payload_json(model)   # the JSON of types.normalised(model)
        rate_key = rate_key_for(jt, types.normalised(model)) if jt.rate_limit else None
    limits.check_payload_bytes(len(payload) + (len(secrets) if secrets else 0),
                               limit=max_bytes)
    return {
        "job_type": jt.name, "order_id": order_id, "portal": portal,
        "payload": payload.decode(), "secrets": secrets, "secret_key_id": None,
        "secret_dek": None, "secret_data": None, "priority": priority, "run_at": run_at,
        "max_attempts": max_attempts, "idempotency_key": key, "rate_key": rate_key,
    }


def _check_batch_keys(rows: Sequence[Mapping[str, Any]]) -> None:
    """Two lines of a batch with one idempotency key must be of one job type."""
    seen: dict[str, tuple[int, str]] = {}
    for i, r in enumerate(rows):
        key = r["idempotency_key"]
        if key is None:
            continue
        first = seen.setdefault(key, (i, r["job_type"]))
        if first[1] != r["job_type"]:
            raise BatchInputError(i, f"idempotency key already used by job {first[0] + 1} for "
                                  f"a {first[1]} job, not {r['job_type']}")


def enqueue_many(jobs: Sequence[NewJob], conn: Any = None) -> list[Enqueued]:
    """Enqueue ``jobs`` atomically; every one is validated (nothing is written if one is
    invalid, or names an unknown portal). Returns one :class:`Enqueued` per input, in order.

    One INSERT statement, or for a large batch without idempotency keys one binary COPY
    (ids drawn first from the job sequence): either way a single write, so the batch is
    atomic even on an autocommit connection. Inside a caller's transaction the whole batch
    is validated before any statement, so a bad job leaves that transaction usable; on an
    autocommit connection outside a transaction block (or portalq's own) a large batch is
    validated while its COPY is written, and a bad job aborts the COPY
    (:func:`jobs.enqueue_paths.copy_streamed`).
    """
    if not jobs:
        return []
    try:
        return _enqueue_many(jobs, conn)
    except (psycopg.errors.DataError, psycopg.errors.ProgramLimitExceeded,
            psycopg.DataError) as exc:
        # the checks above should leave nothing for PostgreSQL to refuse; if it does, say
        # which kind of error without its text (which may quote a payload value)
        raise InputError("the database refused a value of the job"
                         + (f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else "")) from None


#: a streamed COPY validates this many jobs before it starts, then the same number at a
#: time while the rows before them are on their way to the server
_RUN = 64


def _validate_all(jobs: Sequence[NewJob]) -> list[dict[str, Any]]:
    max_bytes = limits.max_payload_bytes()   # once per batch
    if len(jobs) == 1:
        return [_validate(jobs[0], max_bytes, {})]
    return _validate_run(jobs, 0, max_bytes, {}, len(jobs))


def _validate_run(jobs: Sequence[NewJob], start: int, max_bytes: int,
                  known: dict[str, types.JobType], n: int = _RUN) -> list[dict[str, Any]]:
    """The rows of ``jobs[start:start + n]``, or the :class:`BatchInputError` of the first
    bad one."""
    rows = []
    for i in range(start, min(start + n, len(jobs))):
        try:
            rows.append(_validate(jobs[i], max_bytes, known))
        except InputError as exc:
            raise BatchInputError(i, str(exc)) from None
    return rows


def _enqueue_many(jobs: Sequence[NewJob], conn: Any) -> list[Enqueued]:
    """The batch validated, then written by the path that fits it (jobs/enqueue_paths.py)."""
    if len(jobs) >= COPY_MIN and all(j.idempotency_key is None for j in jobs):
        with _use(conn) as c:
            if conn is None or paths.outside_transaction(c):   # an aborted COPY costs it nothing
                max_bytes = limits.max_payload_bytes()
                known: dict[str, types.JobType] = {}
                ids = paths.copy_streamed(
                    c, len(jobs), lambda start: _validate_run(jobs, start, max_bytes, known),
                    lambda: _validate_all(jobs))
            else:
                ids = paths.copy_batch(c, _validate_all(jobs), clock.now())
        return [Enqueued(i, True) for i in ids]
    rows = _validate_all(jobs)
    if len(rows) == 1:
        with _use(conn) as c:
            return [Enqueued(*paths.insert_one(c, rows[0]))]
    _check_batch_keys(rows)
    with _use(conn) as c:
        return [Enqueued(i, created) for i, created in paths.insert_many(c, rows)]


def enqueue(job_type: str, order_id: str, payload: Mapping[str, Any] | None = None, *,
            conn: Any = None, **options: Any) -> Enqueued:
    """Enqueue one job (see :class:`NewJob` for the options)."""
    return enqueue_many([NewJob(job_type, order_id, payload or {}, **options)], conn)[0]

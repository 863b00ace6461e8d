"""Enqueueing: every job of a batch validated (jobs.limits, its type's schema) before
anything is written, its secrets sealed bound to its id (jobs.secrets.sealing), then one
INSERT, or for a large batch without idempotency keys one binary COPY.

``conn`` as everywhere in the queue's API (:mod:`jobs.db.txn`): the caller's connection (the
job exists iff its transaction commits) or ``None`` (one of portalq's own).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from portalq.jobs import (
    clock,
    id_blocks,
    limits,
    types,
)
from portalq.jobs.db import sql
from portalq.jobs.db.txn import use as _use
from portalq.jobs.errors import BatchInputError, IllegalTransition, InputError
from portalq.jobs.secrets import crypto, key_registry
from portalq.jobs.secrets import sealing as secrets_at_rest


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


def _check_existing_keys(existing: Sequence[Mapping[str, Any]],
                         rows: Sequence[Mapping[str, Any]]) -> None:
    """An idempotency key already taken by a job of another type is an error, not a hit."""
    found = {r["idempotency_key"]: r for r in existing}
    for i, r in enumerate(rows):
        other = found.get(r["idempotency_key"]) if r["idempotency_key"] else None
        if other is not None and other["job_type"] != r["job_type"]:
            detail = (f"idempotency key already used by job {other['id']}, a "
                      f"{other['job_type']} job, not {r['job_type']}")
            raise BatchInputError(i, detail) if len(rows) > 1 else InputError(detail)


#: batches at least this large without idempotency keys are written with COPY
COPY_MIN = 64
_COPY_TYPES = ("int8", "text", "text", "text", "jsonb", "text", "int2", "timestamptz", "int2",
               "text", "timestamptz", "timestamptz", "text", "bytea", "bytea")


def enqueue_many(jobs: Sequence[NewJob], conn: Any = None) -> list[Enqueued]:
    """Enqueue ``jobs`` atomically; every one is validated (nothing is written if one is
    invalid, or names an unknown portal). Returns one :class:`Enqueued` per input, in order.

    One INSERT statement, or for a large batch without idempotency keys one binary COPY
    (ids drawn first from the job sequence): either way a single write, so the batch is
    atomic even on an autocommit connection. Inside a caller's transaction the whole batch
    is validated before any statement, so a bad job leaves that transaction usable; on an
    autocommit connection outside a transaction block (or portalq's own) a large batch is
    validated while its COPY is written, and a bad job aborts the COPY
    (:func:`_copy_streamed`).
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
    if len(jobs) >= COPY_MIN and all(j.idempotency_key is None for j in jobs):
        with _use(conn) as c:
            if conn is None or _outside_transaction(c):   # an aborted COPY costs it nothing
                return _copy_streamed(c, jobs)
            return _enqueue_copy(c, _validate_all(jobs), clock.now())
    rows = _validate_all(jobs)
    if len(rows) == 1:
        with _use(conn) as c:
            row = rows[0]
            _seal(c, rows)
            row["now"] = now = clock.now()
            if row["run_at"] is None:
                row["run_at"] = now
            return [_enqueue_one(c, row)]
    _check_batch_keys(rows)
    keys = [r["idempotency_key"] for r in rows if r["idempotency_key"] is not None]
    with _use(conn) as c:
        now = clock.now()
        if keys:
            # before the INSERT: on an autocommit connection it commits at once
            _check_existing_keys(sql.fetch(c, "ids_by_idempotency_key", {"keys": keys}), rows)
        _seal(c, rows)
        params: dict[str, Any] = {k: [r[k] for r in rows] for k in rows[0]}
        params["run_at"] = [r or now for r in params["run_at"]]
        params["now"] = now
        inserted = sql.fetch(c, "enqueue_many", params)
        unknown = [r["unknown_portal"] for r in inserted if r["unknown_portal"] is not None]
        if unknown:  # nothing was inserted
            raise InputError(f"unknown portal {unknown[0]!r}")
        out: list[Enqueued | None] = [None] * len(rows)
        by_key: dict[str, int] = {}
        pos = 0
        # rows come back in insertion order; skipped ones (existing keys) are looked up
        for i, r in enumerate(rows):
            if pos < len(inserted) and inserted[pos]["idempotency_key"] == r["idempotency_key"]:
                out[i] = Enqueued(inserted[pos]["id"], True)
                if r["idempotency_key"]:
                    by_key[r["idempotency_key"]] = inserted[pos]["id"]
                pos += 1
        missing = [r["idempotency_key"] for i, r in enumerate(rows) if out[i] is None]
        if missing:
            found = sql.fetch(c, "ids_by_idempotency_key", {"keys": missing})
            if not _outside_transaction(c):  # a key taken by another type since: roll back
                _check_existing_keys(found, rows)
            for row in found:
                by_key.setdefault(row["idempotency_key"], row["id"])
            for i, r in enumerate(rows):
                if out[i] is None:
                    out[i] = Enqueued(by_key[r["idempotency_key"]], False)
        return [e for e in out if e is not None]


def _outside_transaction(c: psycopg.Connection[Any]) -> bool:
    """Each statement on ``c`` commits on its own: autocommit, and not inside a
    ``conn.transaction()`` block (an autocommit connection's BEGIN)."""
    return c.autocommit and c.pgconn.transaction_status == TransactionStatus.IDLE


#: per autocommit connection, the portals it has seen exist. Portals are never deleted or
#: renamed (migration 0008), so this never goes stale; it spares later enqueues the portal
#: check. Not kept from inside a transaction: the portal it saw may be one that
#: transaction created, and it may yet roll back.
_SEEN_PORTALS: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[str]] = (
    weakref.WeakKeyDictionary())


def _seen_portals(c: psycopg.Connection[Any]) -> set[str]:
    if not _outside_transaction(c):
        return set()
    seen = _SEEN_PORTALS.get(c)
    if seen is None:
        seen = _SEEN_PORTALS[c] = set()
    return seen


def _enqueue_one(c: psycopg.Connection[Any], params: dict[str, Any], *,
                 again: bool = True) -> Enqueued:
    seen = _seen_portals(c)
    known = params["portal"] in seen
    new_id = sql.fetch_value(c, "enqueue_one_known" if known else "enqueue_one", params)
    if new_id is not None:
        seen.add(params["portal"])
        return Enqueued(new_id, True)
    # nothing inserted: an unknown portal (checked first, as in a batch), or a known key
    if not known and not sql.fetch(c, "portals_named", {"codes": [params["portal"]]}):
        raise InputError(f"unknown portal {params['portal']!r}")
    seen.add(params["portal"])
    existing = sql.fetch(c, "ids_by_idempotency_key", {"keys": [params["idempotency_key"]]})
    _check_existing_keys(existing, [params])
    if existing:
        return Enqueued(existing[0]["id"], False)
    if again:  # that job was deleted in between (pruned): insert after all
        return _enqueue_one(c, params, again=False)
    raise IllegalTransition("the job with this idempotency key changed concurrently; retry")


def _seal(c: psycopg.Connection[Any], rows: list[dict[str, Any]],
          ids: Sequence[int] | None = None, *, note: bool = True) -> bool:
    """Seal each row's secrets bound to its job id (``ids``, or ids taken now from the
    sequence for the rows that have secrets: jobs/id_blocks.py); ``id`` None for the
    others (the column's default). Whether any was sealed; with ``note`` (not while a
    COPY holds the connection), the database is then recorded as one using the key file."""
    if ids is None:
        need = sum(r["secrets"] is not None for r in rows)
        if need:
            taken = iter(id_blocks.take(c, need))
            for r in rows:
                r["id"] = next(taken) if r["secrets"] is not None else None
        else:
            for r in rows:
                r["id"] = None
    else:
        for r, i in zip(rows, ids, strict=True):
            r["id"] = i
    sealing = any(r["secrets"] is not None for r in rows)
    secrets_at_rest.seal_rows(rows)
    if sealing and note:   # this database uses the key file: `keys retire` must know it
        key_registry.note(c, crypto.provider())
    return sealing


def _checked_portals(c: psycopg.Connection[Any], portals: set[str]) -> set[str]:
    """``portals`` and those the connection has seen, once each of ``portals`` is known
    to exist (:class:`InputError` for one that does not)."""
    seen = _seen_portals(c)
    wanted = portals - seen
    if wanted:
        known = {p["code"] for p in sql.fetch(c, "portals_named", {"codes": sorted(wanted)})}
        if wanted - known:
            raise InputError(f"unknown portal {sorted(wanted - known)[0]!r}")
        seen.update(known)
    return seen | portals


def _copy_rows(rows: Sequence[dict[str, Any]], ids: Sequence[int], now: datetime,
               ) -> Iterator[tuple[Any, ...]]:
    """The COPY's rows (the columns of ``enqueue_copy``)."""
    for i, r in zip(ids, rows, strict=True):
        yield (i, r["job_type"], r["order_id"], r["portal"], r["payload"], "pending",
               r["priority"], r["run_at"] or now, r["max_attempts"], r["rate_key"], now, now,
               r["secret_key_id"], r["secret_dek"], r["secret_data"])


def _enqueue_copy(c: psycopg.Connection[Any], rows: list[dict[str, Any]], now: datetime,
                  ) -> list[Enqueued]:
    """A large batch already validated: one COPY."""
    _checked_portals(c, {r["portal"] for r in rows})
    ids = sql.fetch_value(c, "next_job_ids", {"n": len(rows)})
    _seal(c, rows, ids)
    sql.copy_in(c, "enqueue_copy", _COPY_TYPES, _copy_rows(rows, ids, now), json_text=True)
    return [Enqueued(i, True) for i in ids]


class _Abort(Exception):
    """Ends a COPY from inside its rows. Its message reaches the server's log, so it says
    nothing of the job; ``error`` is what ended it (None: a portal not checked yet)."""

    def __init__(self, error: BaseException | None) -> None:
        super().__init__("a job of the batch was refused")
        self.error = error


def _copy_streamed(c: psycopg.Connection[Any], jobs: Sequence[NewJob]) -> list[Enqueued]:
    """A large batch on a connection outside a transaction (or portalq's own): one COPY, written
    while the batch is validated and sealed, so the server stores the first rows while
    the client checks the next. A bad job aborts the COPY: nothing is written, and the
    error is the one the whole batch validated first would give. A portal the first run
    did not name aborts it too; the batch is then validated whole, checked and copied."""
    max_bytes = limits.max_payload_bytes()
    known: dict[str, types.JobType] = {}
    first = _validate_run(jobs, 0, max_bytes, known)
    checked = _checked_portals(c, {r["portal"] for r in first})
    now = clock.now()
    ids: list[int] = sql.fetch_value(c, "next_job_ids", {"n": len(jobs)})
    if any(jt.secret_fields for jt in known.values()):   # before the COPY holds c
        key_registry.note(c, crypto.provider())
    sealed = False

    def rows() -> Iterator[tuple[Any, ...]]:
        nonlocal sealed
        start = 0
        while start < len(jobs):
            try:
                run = first if start == 0 else _validate_run(jobs, start, max_bytes, known)
                taken = ids[start:start + len(run)]
                sealed = _seal(c, run, taken, note=False) or sealed
            except Exception as exc:
                raise _Abort(exc) from None
            if any(r["portal"] not in checked for r in run):
                raise _Abort(None)
            yield from _copy_rows(run, taken, now)
            start += len(run)

    try:
        sql.copy_in(c, "enqueue_copy", _COPY_TYPES, rows(), json_text=True)
    except _Abort as abort:
        if abort.error is not None:
            raise abort.error from None
        if not c.autocommit:
            c.rollback()   # portalq's own connection: nothing else was in its transaction
        return _enqueue_copy(c, _validate_all(jobs), now)
    if sealed:   # a later run's job types (once per process and database: cheap)
        key_registry.note(c, crypto.provider())
    return [Enqueued(i, True) for i in ids]


def enqueue(job_type: str, order_id: str, payload: Mapping[str, Any] | None = None, *,
            conn: Any = None, **options: Any) -> Enqueued:
    """Enqueue one job (see :class:`NewJob` for the options)."""
    return enqueue_many([NewJob(job_type, order_id, payload or {}, **options)], conn)[0]

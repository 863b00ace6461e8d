"""The queue's synchronous API: enqueue (own or caller's transaction), inspect, cancel,
admin retry, rescue, deferral, pruning. The worker's async side is :mod:`jobs.worker_api`.

``conn`` may be a psycopg ``Connection``, a SQLAlchemy ``Connection`` or ``Session`` (the
statement then runs inside *its* transaction: the job exists iff that commits), or
``None`` (a connection of portalq's own, committed before returning).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import psycopg
from psycopg.types.json import Jsonb

from jobs import (
    clock,
    crypto,
    id_blocks,
    limits,
    portals_repo,
    secrets_at_rest,
    sql,
    submission,
    types,
)
from jobs.errors import BatchInputError, IllegalTransition, InputError, JobNotFound
from jobs.kinds import EventKind, JobStatus
from jobs.rows import JobDetail, JobListRow, JobRow

ACTIVE = ("pending", "deferred", "running")


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


def raw_connection(conn: Any) -> psycopg.Connection[Any]:
    """The psycopg connection behind a SQLAlchemy Session/Connection (same transaction)."""
    if isinstance(conn, psycopg.Connection):
        return conn
    if hasattr(conn, "connection") and callable(getattr(conn, "get_bind", None)):
        conn = conn.connection()  # Session -> its Connection (begins if needed)
    dbapi = getattr(conn, "connection", None)  # SQLAlchemy Connection -> pool proxy
    driver = getattr(dbapi, "driver_connection", None)
    if isinstance(driver, psycopg.Connection):
        return driver
    raise TypeError(f"not a psycopg/SQLAlchemy connection: {type(conn).__name__}")


@contextmanager
def connect(url: str | None = None) -> Iterator[psycopg.Connection[Any]]:
    """A connection of portalq's own; committed on success, rolled back on error."""
    from jobs.database import connect_options, database_url, libpq_dsn

    with psycopg.connect(libpq_dsn(database_url(url)), **connect_options()) as conn:
        yield conn


@contextmanager
def _use(conn: Any) -> Iterator[psycopg.Connection[Any]]:
    if conn is None:
        with connect() as own:
            yield own
    else:
        yield raw_connection(conn)


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


def _known_portals(conn: psycopg.Connection[Any]) -> set[str]:
    return {row["code"] for row in sql.fetch(conn, "list_portals")}


#: batches at least this large without idempotency keys are written with COPY
COPY_MIN = 64
_COPY_TYPES = ("int8", "text", "text", "text", "jsonb", "text", "int2", "timestamptz", "int2",
               "text", "timestamptz", "timestamptz", "text", "bytea", "bytea")


def enqueue_many(jobs: Sequence[NewJob], conn: Any = None) -> list[Enqueued]:
    """Enqueue ``jobs`` atomically; all are validated first (nothing is written if one is
    invalid, or names an unknown portal). Returns one :class:`Enqueued` per input, in order.

    One INSERT statement, or for a large batch without idempotency keys one binary COPY
    (ids drawn first from the job sequence): either way a single write, so the batch is
    atomic even on an autocommit connection.
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


def _validate_all(jobs: Sequence[NewJob]) -> list[dict[str, Any]]:
    max_bytes = limits.max_payload_bytes()   # once per batch
    if len(jobs) == 1:
        return [_validate(jobs[0], max_bytes, {})]
    rows = []
    known: dict[str, types.JobType] = {}
    for i, job in enumerate(jobs):
        try:
            rows.append(_validate(job, max_bytes, known))
        except InputError as exc:
            raise BatchInputError(i, str(exc)) from None
    return rows


def _enqueue_many(jobs: Sequence[NewJob], conn: Any) -> list[Enqueued]:
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
        if len(rows) >= COPY_MIN and not keys:
            return _enqueue_copy(c, rows, now)
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
            if not c.autocommit:  # a key taken by another type since the check: roll back
                _check_existing_keys(found, rows)
            for row in found:
                by_key.setdefault(row["idempotency_key"], row["id"])
            for i, r in enumerate(rows):
                if out[i] is None:
                    out[i] = Enqueued(by_key[r["idempotency_key"]], False)
        return [e for e in out if e is not None]


#: per autocommit connection, the portals it has seen exist. Portals are never deleted or
#: renamed (migration 0008), so this never goes stale; it spares later enqueues the portal
#: check. Not kept for a connection inside a transaction: the portal it saw may be one that
#: transaction created, and it may yet roll back.
_SEEN_PORTALS: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[str]] = (
    weakref.WeakKeyDictionary())


def _seen_portals(c: psycopg.Connection[Any]) -> set[str]:
    if not c.autocommit:
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
          ids: Sequence[int] | None = None) -> None:
    """Seal each row's secrets bound to its job id (``ids``, or ids taken now from the
    sequence for the rows that have secrets: jobs/id_blocks.py); ``id`` None for the
    others (the column's default)."""
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
    secrets_at_rest.seal_rows(rows)


def _enqueue_copy(c: psycopg.Connection[Any], rows: list[dict[str, Any]], now: datetime,
                  ) -> list[Enqueued]:
    seen = _seen_portals(c)
    wanted = {r["portal"] for r in rows} - seen
    if wanted:
        known = {p["code"] for p in sql.fetch(c, "portals_named", {"codes": sorted(wanted)})}
        if wanted - known:
            raise InputError(f"unknown portal {sorted(wanted - known)[0]!r}")
        seen.update(known)
    ids = sql.fetch_value(c, "next_job_ids", {"n": len(rows)})
    _seal(c, rows, ids)
    sql.copy_in(c, "enqueue_copy", _COPY_TYPES, (
        (i, r["job_type"], r["order_id"], r["portal"], r["payload"], "pending", r["priority"],
         r["run_at"] or now, r["max_attempts"], r["rate_key"], now, now, r["secret_key_id"],
         r["secret_dek"], r["secret_data"])
        for i, r in zip(ids, rows, strict=True)), json_text=True)
    return [Enqueued(i, True) for i in ids]


def enqueue(job_type: str, order_id: str, payload: Mapping[str, Any] | None = None, *,
            conn: Any = None, **options: Any) -> Enqueued:
    """Enqueue one job (see :class:`NewJob` for the options)."""
    return enqueue_many([NewJob(job_type, order_id, payload or {}, **options)], conn)[0]


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
        result = {**(job["result"] or {}), "confirmation": confirmation.strip(),
                  "confirmed_by": actor}
        sql.fetch(c, "admin_complete", {
            "id": job_id, "result": Jsonb(result), "now": clock.now(), "actor": actor,
            "detail": Jsonb({"event": EventKind.ADMIN_CONFIRMED_FILED, "note": note or ""})})


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

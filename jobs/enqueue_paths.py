"""How enqueue writes the jobs it has validated (:mod:`jobs.enqueue` validates a batch and
picks one of these). The plain way is one INSERT of arrays for any batch; each other path
is here because a measurement showed it faster for its case (the figures, and how they were
taken, are in docs/benchmarks.md, "Enqueue").

- **A batch** (:func:`insert_many`): one INSERT of arrays, the portal check and the
  idempotency keys inside the statement: one statement, atomic even on an autocommit
  connection, one round trip.
- **One job** (:func:`insert_one`): an INSERT with scalar parameters, cheaper than the
  arrays' ``unnest`` for one row. A connection whose statements commit on their own
  remembers the portals it has seen exist and leaves the portal check out for them
  (``enqueue_one_known``): portals are never deleted or renamed (migration 0008).
- **A large batch without idempotency keys** (:func:`copy_batch`, :data:`COPY_MIN` jobs
  or more): one binary COPY, its ids drawn first (``next_job_ids``); the server stores a
  COPY's rows for less than the INSERT's. The COPY ends in a volatile ``WHERE`` that keeps
  every row, so the server stores each row as it arrives instead of buffering them for one
  multi-row insert (queries.sql, ``enqueue_copy``), and its rows go in blocks of
  :data:`COPY_BLOCK` bytes, each sent when made: after the client's last row the server has
  one small block left to store.
- **The same on a connection whose statements commit on their own, or portalq's own**
  (:func:`copy_streamed`): the COPY starts once the first jobs are validated; the next ones
  are validated and sealed while the rows before them are stored, so client and server work
  at once. A bad job aborts the COPY, which costs such a connection nothing; inside a
  caller's transaction it would abort that transaction, so there the batch is validated
  whole first (:func:`copy_batch`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from operator import itemgetter
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from portalq.jobs import clock, id_blocks
from portalq.jobs.db import sql
from portalq.jobs.errors import BatchInputError, IllegalTransition, InputError
from portalq.jobs.secrets import crypto, key_registry
from portalq.jobs.secrets import sealing as secrets_at_rest

#: batches at least this large without idempotency keys are written with COPY
COPY_MIN = 64
#: the size of the blocks a COPY's rows are sent in (psycopg's own are larger)
COPY_BLOCK = 4096

#: a job's id and whether this enqueue created it (False: its idempotency key existed)
Written = tuple[int, bool]


def outside_transaction(c: psycopg.Connection[Any]) -> bool:
    """Each statement on ``c`` commits on its own: autocommit, and not inside a
    ``conn.transaction()`` block (an autocommit connection's BEGIN)."""
    return c.autocommit and c.pgconn.transaction_status == TransactionStatus.IDLE


# ------------------------------------------------------------------ the paths


def insert_one(c: psycopg.Connection[Any], row: dict[str, Any]) -> Written:
    """One job: its secrets sealed, then one INSERT."""
    seal(c, [row])
    row["now"] = now = clock.now()
    if row["run_at"] is None:
        row["run_at"] = now
    return _insert_one(c, row)


def insert_many(c: psycopg.Connection[Any], rows: list[dict[str, Any]]) -> list[Written]:
    """A batch in one INSERT of arrays; an existing idempotency key inserts nothing and
    gives back its job (one of another job type is an error)."""
    now = clock.now()
    keys = [r["idempotency_key"] for r in rows if r["idempotency_key"] is not None]
    if keys:
        # before the INSERT: on an autocommit connection it commits at once
        check_existing_keys(sql.fetch(c, "ids_by_idempotency_key", {"keys": keys}), rows)
    seal(c, rows)
    params: dict[str, Any] = {k: [r[k] for r in rows] for k in rows[0]}
    params["run_at"] = [r or now for r in params["run_at"]]
    params["now"] = now
    inserted = sql.fetch(c, "enqueue_many", params)
    unknown = [r["unknown_portal"] for r in inserted if r["unknown_portal"] is not None]
    if unknown:  # nothing was inserted
        raise InputError(f"unknown portal {unknown[0]!r}")
    return _matched(c, rows, inserted)


def _matched(c: psycopg.Connection[Any], rows: list[dict[str, Any]],
             inserted: list[dict[str, Any]]) -> list[Written]:
    """Each row's job: the inserted ones come back in insertion order; a row skipped (its
    idempotency key existed) is looked up by its key."""
    out: list[Written | None] = [None] * len(rows)
    by_key: dict[str, int] = {}
    pos = 0
    for i, r in enumerate(rows):
        key = r["idempotency_key"]
        if pos < len(inserted) and inserted[pos]["idempotency_key"] == key:
            out[i] = (inserted[pos]["id"], True)
            if key:
                by_key[key] = inserted[pos]["id"]
            pos += 1
    missing = [r["idempotency_key"] for r, w in zip(rows, out, strict=True) if w is None]
    if missing:
        found = sql.fetch(c, "ids_by_idempotency_key", {"keys": missing})
        if not outside_transaction(c):  # a key taken by another type since: roll back
            check_existing_keys(found, rows)
        for row in found:
            by_key.setdefault(row["idempotency_key"], row["id"])
    return [w if w is not None else (by_key[r["idempotency_key"]], False)
            for r, w in zip(rows, out, strict=True)]


def copy_batch(c: psycopg.Connection[Any], rows: list[dict[str, Any]], now: datetime,
               ) -> list[int]:
    """A large batch already validated: one COPY. The new jobs' ids."""
    checked_portals(c, {r["portal"] for r in rows})
    ids: list[int] = sql.fetch_value(c, "next_job_ids", {"n": len(rows)})
    seal(c, rows, ids)
    _copy(c, _copy_values(rows, now))
    return ids


def copy_streamed(c: psycopg.Connection[Any], n: int,
                  validated: Callable[[int], list[dict[str, Any]]],
                  all_validated: Callable[[], list[dict[str, Any]]]) -> list[int]:
    """A large batch of ``n`` jobs on a connection whose statements commit on their own (or
    portalq's own): one COPY, written while the batch is validated and sealed.
    ``validated(start)``: the rows of the next jobs from ``start`` (a run), or the
    :class:`InputError` of the first bad one; ``all_validated()``: every row.

    A bad job aborts the COPY: nothing is written, and the error is the one the whole batch
    validated first would give. A portal the first run did not name aborts it too; the
    batch is then validated whole, checked and copied (:func:`copy_batch`)."""
    first = validated(0)
    checked = checked_portals(c, {r["portal"] for r in first})
    now = clock.now()
    ids: list[int] = sql.fetch_value(c, "next_job_ids", {"n": n})
    if any(r["secrets"] is not None for r in first):   # before the COPY holds c
        key_registry.note(c, crypto.provider())
    sealed = False

    def rows() -> Iterator[tuple[Any, ...]]:
        nonlocal sealed
        start = 0
        while start < n:
            try:
                run = first if start == 0 else validated(start)
                taken = ids[start:start + len(run)]
                sealed = seal(c, run, taken, note=False) or sealed
            except Exception as exc:
                raise _Abort(exc) from None
            if any(r["portal"] not in checked for r in run):
                raise _Abort(None)
            yield from _copy_values(run, now)
            start += len(run)

    try:
        _copy(c, rows())
    except _Abort as abort:
        if abort.error is not None:
            raise abort.error from None
        if not c.autocommit:
            c.rollback()   # portalq's own connection: nothing else was in its transaction
        return copy_batch(c, all_validated(), now)
    if sealed:   # a later run's job types (once per process and database: cheap)
        key_registry.note(c, crypto.provider())
    return ids


class _Abort(Exception):
    """Ends a COPY from inside its rows. Its message reaches the server's log, so it says
    nothing of the job; ``error`` is what ended it (None: a portal not checked yet)."""

    def __init__(self, error: BaseException | None) -> None:
        super().__init__("a job of the batch was refused")
        self.error = error


# ------------------------------------------------------------------ the COPY's columns

#: the type of each column the COPY writes, by name. The order of the columns is the
#: statement's own (queries.sql, ``enqueue_copy``) and each row's value is taken by name,
#: so nothing here is kept in step by position.
COPY_COLUMN_TYPES: Mapping[str, str] = {
    "id": "int8", "job_type": "text", "order_id": "text", "portal": "text",
    "payload": "jsonb", "status": "text", "priority": "int2", "run_at": "timestamptz",
    "max_attempts": "int2", "rate_key": "text", "created_at": "timestamptz",
    "updated_at": "timestamptz", "secret_key_id": "text", "secret_dek": "bytea",
    "secret_data": "bytea",
}


@dataclass(frozen=True)
class CopyColumns:
    names: tuple[str, ...]
    types: tuple[str, ...]
    #: a row (a mapping with every name) -> its values in the statement's order
    values: Callable[[Mapping[str, Any]], tuple[Any, ...]]


@cache
def copy_columns() -> CopyColumns:
    """The columns of ``enqueue_copy``, as its statement names them, with their types."""
    names = sql.copy_columns("enqueue_copy")
    unknown = [n for n in names if n not in COPY_COLUMN_TYPES]
    if unknown:
        raise RuntimeError(f"enqueue_copy writes {unknown}: COPY_COLUMN_TYPES has no type")
    return CopyColumns(names, tuple(COPY_COLUMN_TYPES[n] for n in names), itemgetter(*names))


def _copy_values(rows: Sequence[dict[str, Any]], now: datetime,
                 ) -> Iterator[tuple[Any, ...]]:
    """The COPY's rows: each job's row (its ``id`` set by :func:`seal`) with the columns
    an INSERT would give it."""
    values = copy_columns().values
    for r in rows:
        r["status"] = "pending"
        r["created_at"] = r["updated_at"] = now
        if r["run_at"] is None:
            r["run_at"] = now
        yield values(r)


def _copy(c: psycopg.Connection[Any], rows: Iterator[tuple[Any, ...]]) -> None:
    sql.copy_in(c, "enqueue_copy", copy_columns().types, rows, json_text=True,
                block=COPY_BLOCK)


# ------------------------------------------------------------------ shared steps


def seal(c: psycopg.Connection[Any], rows: list[dict[str, Any]],
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


def check_existing_keys(existing: Sequence[Mapping[str, Any]],
                        rows: Sequence[Mapping[str, Any]]) -> None:
    """An idempotency key already taken by a job of another type is an error, not a hit."""
    found = {r["idempotency_key"]: r for r in existing}
    for i, r in enumerate(rows):
        other = found.get(r["idempotency_key"]) if r["idempotency_key"] else None
        if other is not None and other["job_type"] != r["job_type"]:
            detail = (f"idempotency key already used by job {other['id']}, a "
                      f"{other['job_type']} job, not {r['job_type']}")
            raise BatchInputError(i, detail) if len(rows) > 1 else InputError(detail)


#: per autocommit connection, the portals it has seen exist. Portals are never deleted or
#: renamed (migration 0008), so this never goes stale; it spares later enqueues the portal
#: check. Not kept from inside a transaction: the portal it saw may be one that
#: transaction created, and it may yet roll back.
_SEEN_PORTALS: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[str]] = (
    weakref.WeakKeyDictionary())


def _seen_portals(c: psycopg.Connection[Any]) -> set[str]:
    if not outside_transaction(c):
        return set()
    seen = _SEEN_PORTALS.get(c)
    if seen is None:
        seen = _SEEN_PORTALS[c] = set()
    return seen


def checked_portals(c: psycopg.Connection[Any], portals: set[str]) -> set[str]:
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


def _insert_one(c: psycopg.Connection[Any], params: dict[str, Any], *,
                again: bool = True) -> Written:
    seen = _seen_portals(c)
    known = params["portal"] in seen
    new_id = sql.fetch_value(c, "enqueue_one_known" if known else "enqueue_one", params)
    if new_id is not None:
        seen.add(params["portal"])
        return new_id, True
    # nothing inserted: an unknown portal (checked first, as in a batch), or a known key
    if not known and not sql.fetch(c, "portals_named", {"codes": [params["portal"]]}):
        raise InputError(f"unknown portal {params['portal']!r}")
    seen.add(params["portal"])
    existing = sql.fetch(c, "ids_by_idempotency_key", {"keys": [params["idempotency_key"]]})
    check_existing_keys(existing, [params])
    if existing:
        return existing[0]["id"], False
    if again:  # that job was deleted in between (pruned): insert after all
        return _insert_one(c, params, again=False)
    raise IllegalTransition("the job with this idempotency key changed concurrently; retry")

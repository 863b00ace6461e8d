"""The console search's indexer (issue 49.1, migration 0033): ``job_search`` filled from
the queue's own ids in batches, off the enqueue's transaction.

A high-water mark (``job_search_mark.indexed_to``) says up to which id every job has its
row. The mark follows the ids only where they run on without a gap: ids come from a
sequence, so a job whose transaction is still in flight (or was rolled back, or whose id a
connection's block dropped: jobs.id_blocks) leaves a gap below ids already committed. At a
gap the indexer waits :data:`SETTLE_SECONDS` (any id below it is written within that time
of its taking, or never), notes the transactions running then, and passes the gap once they
are all over: an id still missing then will never be written. ``settled`` and the noting
are in ``queries.sql`` (``search_mark``, ``search_mark_set``). The search tests the jobs
above the mark on the queue itself, so a job is found the moment it is committed, indexed
or not (``jobs.admin.reads``).

The service runs :func:`astep` in a loop on the leader (``scheduler.search_indexer``);
``portalq search rebuild`` runs :func:`rebuild`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, Connection

from portalq.jobs import id_blocks
from portalq.jobs.db import sql

#: ids read per step: one short transaction each (~50 ms at 5,000 jobs with a searched field)
BATCH = 5_000
#: how long a gap in the ids waits before the transactions then running are noted: an id
#: taken from a connection's block (jobs.id_blocks) is written within MAX_AGE of its taking,
#: which came before the gap was seen; the margin covers the enqueue's round trip
SETTLE_SECONDS = id_blocks.MAX_AGE + 0.2


@dataclass(frozen=True)
class Step:
    indexed_to: int
    #: how many ids the mark passed
    passed: int
    #: the batch was full: there is more to index now
    full: bool


@dataclass(frozen=True)
class Mark:
    indexed_to: int
    checked_at: datetime
    #: when the job at the mark was enqueued (None: no job there, e.g. an empty queue)
    indexed_at: datetime | None
    #: jobs are above the mark (not indexed yet)
    behind: bool


def _advance(row: dict[str, Any], ids: list[int], limit: int,
             ) -> tuple[int, int | None, bool]:
    """The new mark, the gap still waited for (``pending_to``) and whether it is a new one."""
    mark, pending = int(row["indexed_to"]), row["pending_to"]
    full = len(ids) >= limit
    if row["settled"]:   # every id up to pending_to that exists is visible now
        mark = max(mark, min(pending, ids[-1]) if full and ids else pending)
    for i in ids:
        if i <= mark:
            continue
        if i != mark + 1:
            break
        mark = i
    if pending is not None and mark >= pending:
        pending = None
    if ids and ids[-1] > mark and pending is None:   # stopped at a gap seen now
        return mark, ids[-1], True
    return mark, pending, False


def _params(row: dict[str, Any], ids: list[int], limit: int) -> tuple[Step, dict[str, Any]]:
    mark, pending, new_gap = _advance(row, ids, limit)
    before = int(row["indexed_to"])
    return (Step(mark, mark - before if mark > before else 0, len(ids) >= limit),
            {"after": before, "upto": mark, "indexed_to": mark, "pending_to": pending,
             "new_gap": new_gap, "ripe": bool(row["ripe"])})


def step(conn: Connection[Any], *, limit: int = BATCH,
         settle_seconds: float = SETTLE_SECONDS) -> Step:
    """One batch: the mark moved over the ids that run on, their rows written."""
    with conn.transaction():
        row = sql.fetch_one(conn, "search_mark", {"settle_seconds": settle_seconds})
        assert row is not None
        ids = [r["id"] for r in sql.fetch(conn, "search_ids_above",
                                          {"after": row["indexed_to"], "limit": limit})]
        done, params = _params(row, ids, limit)
        if done.passed:
            sql.fetch(conn, "search_index_range", params)
        sql.fetch(conn, "search_mark_set", params)
    return done


async def astep(conn: AsyncConnection[Any], *, limit: int = BATCH,
                settle_seconds: float = SETTLE_SECONDS) -> Step:
    """:func:`step` on the service's async connections."""
    async with conn.transaction():
        row = await sql.afetch_one(conn, "search_mark", {"settle_seconds": settle_seconds})
        assert row is not None
        ids = [r["id"] for r in await sql.afetch(
            conn, "search_ids_above", {"after": row["indexed_to"], "limit": limit})]
        done, params = _params(row, ids, limit)
        if done.passed:
            await sql.afetch(conn, "search_index_range", params)
        await sql.afetch(conn, "search_mark_set", params)
    return done


def catch_up(conn: Connection[Any], *, limit: int = BATCH,
             settle_seconds: float = SETTLE_SECONDS) -> int:
    """Steps until one passes nothing (the mark at the newest ids, or at a gap not settled
    yet); how many ids the mark passed."""
    passed = 0
    while True:
        done = step(conn, limit=limit, settle_seconds=settle_seconds)
        passed += done.passed
        if not done.passed:
            return passed


def rebuild(conn: Connection[Any], *, limit: int = BATCH,
            settle_seconds: float = SETTLE_SECONDS) -> int:
    """The index started over (every row out, the mark at 0), then filled again up to the
    newest job there was (a gap in the ids waits for its settling time); how many ids the
    mark passed. Searches meanwhile test the queue above the mark."""
    with conn.transaction():
        top = sql.fetch_one(conn, "search_rebuild")
    assert top is not None
    passed = 0
    while True:
        passed += catch_up(conn, limit=limit, settle_seconds=settle_seconds)
        if mark(conn).indexed_to >= (top["newest"] or 0):
            return passed
        time.sleep(settle_seconds / 4)   # at a gap: until it settles


def mark(conn: Connection[Any]) -> Mark:
    row = sql.fetch_one(conn, "search_mark_read")
    assert row is not None
    return Mark(int(row["indexed_to"]), row["checked_at"], row["indexed_at"],
                bool(row["behind"]))


async def abehind(conn: AsyncConnection[Any]) -> bool:
    """Whether a job is above the mark (read only: the idle indexer writes nothing)."""
    row = await sql.afetch_one(conn, "search_behind")
    return bool(row and row["behind"])


async def amark(conn: AsyncConnection[Any]) -> Mark:
    row = await sql.afetch_one(conn, "search_mark_read")
    assert row is not None
    return Mark(int(row["indexed_to"]), row["checked_at"], row["indexed_at"],
                bool(row["behind"]))

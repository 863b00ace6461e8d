"""The tick's bulk deferral of a closed portal's due jobs to its next opening, in bounded
batches: no statement reads or updates more than ``batch`` rows, each batch is its own
transaction, and the loop stops at its time budget (the rest waits for the next tick: a
closed portal's jobs are not claimed meanwhile). One deferral of 1,000,000 jobs as one
statement held a million row locks, and the leader's tick, for 107 s (issue 19).

A batch the database refuses (a row some constraint or trigger rejects) is split in halves
until the refused rows are found: the others are deferred, the refused ones are left out of
the next batches and reported (:class:`DeferIncomplete`); past ``MAX_STUCK`` refused rows the
deferral stops for this tick."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from portalq.jobs import clock
from portalq.jobs.db import sql
from portalq.jobs.kinds import EventKind

AConn = AsyncConnection[Any]

#: rows per statement: each statement short even on a loaded machine
BATCH = 10_000
#: refused rows after which a deferral gives up for this tick: a constraint that refuses a
#: whole portal's jobs would otherwise cost two statements per job
MAX_STUCK = 100
#: what a refused batch is split on (data the database will not take); a lost connection,
#: a cancelled statement or a deadlock is not the rows' fault and is raised as it is
_REFUSED = (psycopg.errors.IntegrityError, psycopg.errors.DataError,
            psycopg.errors.RaiseException)


class DeferIncomplete(Exception):
    """Some due jobs of the portal could not be deferred (the others were)."""

    def __init__(self, deferred: int, stuck: list[int]) -> None:
        super().__init__(f"{deferred} deferred; {len(stuck)} could not be "
                         f"(jobs {', '.join(map(str, stuck[:10]))})")
        self.deferred = deferred
        self.stuck = stuck


async def defer_portal(conn: AConn, *, portal: str, next_open: datetime, reason: str,
                       batch: int = BATCH, budget_seconds: float | None = None) -> int:
    """Defer ``portal``'s due jobs (pending or deferred, ``run_at`` before ``next_open``)
    to ``next_open``, no attempt spent; the number deferred. Batches of at most ``batch``
    jobs, for at most ``budget_seconds`` (None: until none is left)."""
    now = clock.now()
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    params: dict[str, Any] = {
        "portal": portal, "next_open": next_open, "now": now, "limit": batch,
        "detail": Jsonb({"event": EventKind.PORTAL_CLOSED, "reason": reason})}
    total, stuck = 0, list[int]()
    while True:
        # planned for its parameters each time: a generic plan of the skip scan can fall
        # back to a sequential scan of job_queue
        ids = [r["id"] for r in await sql.afetch(
            conn, "defer_candidates", {**params, "skip": stuck}, prepare=False)]
        if not ids:
            break
        total += await _defer(conn, ids, params, stuck)
        if len(stuck) >= MAX_STUCK:
            break
        if len(ids) < batch or (deadline is not None and time.monotonic() >= deadline):
            break
    if stuck:
        raise DeferIncomplete(total, stuck)
    return total


async def _defer(conn: AConn, ids: list[int], params: dict[str, Any],
                 stuck: list[int]) -> int:
    """Defer ``ids`` in one transaction; refused: each half on its own, down to the
    refused rows, which go to ``stuck``."""
    try:
        async with conn.transaction():
            row = await sql.afetch_one(conn, "defer_ids", {**params, "ids": ids})
        return int(row["deferred"]) if row else 0
    except _REFUSED:
        if len(ids) == 1:
            stuck.append(ids[0])
            return 0
        if len(stuck) >= MAX_STUCK:
            stuck.extend(ids)   # not tried one by one: reported, and tried next tick
            return 0
    half = len(ids) // 2
    return (await _defer(conn, ids[:half], params, stuck)
            + await _defer(conn, ids[half:], params, stuck))

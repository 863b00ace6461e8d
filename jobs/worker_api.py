"""The queue as the worker and the maintenance tick see it (async psycopg).

Every change of a running job is guarded by ``lock_owner``: a worker whose job was
rescued and handed to someone else can no longer touch it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

import psycopg
from psycopg import AsyncConnection
from psycopg import sql as psql
from psycopg.types.json import Jsonb

from portalq.jobs import clock, types
from portalq.jobs.business import order_runs
from portalq.jobs.checkpoints import LOOKUP_ANSWERS, past_point_of_no_return, rescue_decision
from portalq.jobs.db import sql
from portalq.jobs.deferral import DeferIncomplete as DeferIncomplete
from portalq.jobs.deferral import defer_portal as defer_portal
from portalq.jobs.kinds import SERVICE_CHANNELS, Channel, LockKey
from portalq.jobs.operations import portal_rows
from portalq.jobs.rows import ClaimRow
from portalq.jobs.secrets import crypto

AConn = AsyncConnection[Any]
log = logging.getLogger("portalq.queue")


@dataclass(frozen=True)
class Capacity:
    """How many jobs of ``portal`` this claim may take (None: no portal-wide limit), and
    the portal's current day (its own calendar day, for per-key rate limits)."""

    portal: str
    limit: int | None
    day: tuple[datetime, datetime] | None = None
    #: only these job types (a node's role); None: any. One list for the whole claim.
    job_types: tuple[str, ...] | None = None


async def listen(conn: AConn, channels: Sequence[Channel] = SERVICE_CHANNELS) -> None:
    """LISTEN on ``channels`` (all of portalq's by default) on this session."""
    for channel in channels:
        await conn.execute(psql.SQL("LISTEN {}").format(psql.Identifier(channel)))


async def claim(conn: AConn, *, worker: str, capacities: Sequence[Capacity], limit: int,
                now: datetime | None = None,
                key_ids: Sequence[str] | None = None) -> list[ClaimRow]:
    """Claim up to ``limit`` due jobs of the given (open) portals: one statement, committed
    on its own (``conn`` in autocommit mode).

    Portal-wide session limits hold across nodes: claims of limited portals are
    serialised by a lock taken inside the statement, and count the jobs already running
    everywhere after taking it (see ``claim`` in queries.sql). Jobs under a per-key rate
    limit are then checked together, in one short transaction (four round trips a claim,
    where they were four a job).
    ``key_ids``: the keys this node holds; a sealed job wrapped by another is not claimed
    (None: any job).
    """
    now = now or clock.now()
    if not capacities:
        return []
    caps = sorted(capacities, key=lambda c: c.portal)   # one lock order on every node
    job_types = {c.job_types for c in caps}
    if len(job_types) != 1:
        raise ValueError("one claim takes one job-type filter for all its portals")
    only = job_types.pop()
    jobs = await _claim_statement(conn, worker, {
        "portals": [c.portal for c in caps], "limits": [c.limit for c in caps],
        "limit": limit, "portal_count": len(caps), "worker": worker, "now": now,
        "job_types": list(only) if only is not None else None,
        "key_ids": list(key_ids) if key_ids is not None else None})
    checks = _rate_checks(jobs, {c.portal: c.day for c in capacities})
    if not checks:
        return jobs
    try:
        async with conn.transaction():
            over = await _defer_over_rate_limit(conn, checks, worker, now)
    except BaseException:
        # the caller never gets these jobs: back to the queue now (best effort; if the
        # connection is gone, the stale-heartbeat rescue returns them)
        with contextlib.suppress(Exception):
            await sql.afetch(conn, "unclaim", {"ids": [j["id"] for j in jobs],
                                               "worker": worker, "now": clock.now()})
        raise
    return [j for j in jobs if j["id"] not in over]


async def _claim_statement(conn: AConn, worker: str, params: dict[str, Any]) -> list[ClaimRow]:
    """The claim statement, shielded from a cancel (a shutdown): one that lands after the
    server committed the claim and before its rows arrive would leave the jobs running
    under a node that never got them, until the stale-heartbeat rescue. The statement is
    let finish (it is short), and what it took goes back to the queue."""
    statement = asyncio.ensure_future(sql.afetch(conn, "claim", params))
    try:
        return cast("list[ClaimRow]", await asyncio.shield(statement))
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            taken = await statement
            if taken:
                await sql.afetch(conn, "unclaim", {"ids": [j["id"] for j in taken],
                                                   "worker": worker, "now": clock.now()})
        raise


async def sealed_unopenable(conn: AConn, key_ids: Sequence[str]) -> str | None:
    """The key of a waiting sealed job that none of ``key_ids`` opens, if there is one."""
    row = await sql.afetch_one(conn, "sealed_unopenable", {"key_ids": list(key_ids)})
    return str(row["key_id"]) if row else None


async def unclaim(conn: AConn, *, worker: str, ids: Sequence[int]) -> None:
    """Give claimed jobs back as if never claimed (attempt refunded, not started)."""
    await sql.afetch(conn, "unclaim", {"ids": list(ids), "worker": worker, "now": clock.now()})


class _RateCheck(NamedTuple):
    job: ClaimRow
    limit: int
    day: tuple[datetime, datetime]


def _rate_checks(jobs: Sequence[ClaimRow],
                 days: Mapping[str, tuple[datetime, datetime] | None]) -> list[_RateCheck]:
    """The claimed jobs under a per-key limit (e.g. one EIN per responsible party per IRS
    day) with their limit and portal day, in claim order."""
    out = []
    for job in jobs:
        day = days.get(job["portal"])
        if not job["rate_key"] or day is None:
            continue
        try:
            rate = types.get(job["job_type"]).rate_limit
        except Exception:  # noqa: BLE001 - an unregistered type: no limit known
            rate = None
        if rate is not None:
            out.append(_RateCheck(job, rate.limit, day))
    return out


async def _defer_over_rate_limit(conn: AConn, checks: Sequence[_RateCheck], worker: str,
                                 now: datetime) -> set[int]:
    """Per-key limits, counted from the database under per-key locks, so they hold across
    nodes and restarts: one transaction for the whole claim (the keys locked in one
    statement, then one count-and-defer). Within a claim, a key's jobs start in claim
    order up to its limit; the rest are deferred to the next portal day, never started.
    Returns the ids deferred."""
    keys = [c.job["rate_key"] for c in checks]
    await sql.afetch(conn, "lock_rate_keys", {"lock": int(LockKey.RATE_KEY), "keys": keys})
    rows = await sql.afetch(conn, "rate_defer_over", {
        "ids": [c.job["id"] for c in checks], "portals": [c.job["portal"] for c in checks],
        "keys": keys, "limits": [c.limit for c in checks],
        "day_starts": [c.day[0] for c in checks], "day_ends": [c.day[1] for c in checks],
        "now": now, "worker": worker})
    return {r["id"] for r in rows}


async def complete_many(conn: AConn, *, worker: str,
                        results: Sequence[tuple[int, Mapping[str, Any] | None]]) -> set[int]:
    """Mark jobs completed with their results; returns the ids this worker still owned.
    A success also ends its portal's outage streak (and a breaker pause)."""
    if not results:
        return set()
    rows = await sql.afetch(conn, "complete_many", {
        "ids": [r[0] for r in results],
        "results": [json.dumps(r[1]) if r[1] is not None else None for r in results],
        "worker": worker, "now": clock.now()})
    orders = sorted({r["step_of"] for r in rows if r["step_of"] is not None})
    if orders:
        await _release_steps(conn, orders)
    return {r["id"] for r in rows}


async def _release_steps(conn: AConn, orders: list[str]) -> None:
    """The steps after the orders' steps just completed (jobs/business/order_runs.py). Their
    completion is committed: should this fail, the leader's sweep releases them."""
    try:
        await order_runs.arelease_ready(conn, orders)
    except Exception as exc:  # noqa: BLE001 - the completions stand; the sweep retries
        log.error("order steps after %s not released yet: %s", ", ".join(orders[:5]),
                  type(exc).__name__)


@dataclass(frozen=True)
class OutageState:
    streak: int
    paused_by: str | None
    just_paused: bool
    #: this run started after the pause: it was the portal's probe
    probe: bool = False
    #: another job showed an outage sign since this job's last one: the portal's reason
    others_failing: bool = False


async def pause_for_drift(conn: AConn, *, portal: str, job_type: str, reason: str) -> bool:
    """Hold ``job_type`` on ``portal`` for a changed page until an operator resumes the
    portal (its other job types go on); True if this call held it (False: held already, or
    the portal paused by an operator)."""
    async with conn.transaction():
        row = await sql.afetch_one(conn, "drift_pause", {
            "portal": portal, "job_type": job_type, "reason": reason, "now": clock.now()})
    return bool(row and row["paused"])


async def record_outage(conn: AConn, *, portal: str, job_id: int, threshold: int,
                        probe_after: timedelta, reason: str,
                        window: timedelta = timedelta(minutes=5)) -> OutageState:
    """Count one more outage sign on ``portal`` from job ``job_id``; pause the portal
    (circuit breaker) when ``threshold`` distinct jobs showed one within ``window`` (one
    job failing again and again, or two alternately, never make three) -- one "paused"
    notice, however many nodes see the outage. A failing probe of a paused portal pushes
    the next probe back (a run that started before the pause was no probe). Signs of one
    portal are counted one at a time (``outage_lock``), so simultaneous ones see each
    other."""
    now = clock.now()
    async with conn.transaction():
        await sql.afetch(conn, "outage_lock", {"portal": portal})   # one sign at a time
        row = await sql.afetch_one(conn, "outage_seen", {"portal": portal, "job_id": job_id,
                                                         "now": now, "since": now - window})
        if row is None:
            return OutageState(0, None, False)
        if row["paused_at"] is not None:
            probe = row["started_at"] is not None and row["started_at"] >= row["paused_at"]
            if row["paused_by"] == "breaker" and probe:
                await sql.afetch(conn, "probe_failed", {"portal": portal, "now": now,
                                                        "probe_at": now + probe_after})
            return OutageState(row["outage_streak"], row["paused_by"], False, probe=probe,
                               others_failing=row["prev_job"] != job_id)
        if row["outage_streak"] < threshold:
            return OutageState(row["outage_streak"], None, False)
        paused = await portal_rows.apause(conn, portal, by="breaker", reason=reason,
                                           probe_at=now + probe_after)
        return OutageState(row["outage_streak"], "breaker", paused)


async def finish_unsuccessful(conn: AConn, *, job: Mapping[str, Any], worker: str, status: str,
                              error: str, run_at: datetime | None = None,
                              refund_attempt: bool = False,
                              escalation: tuple[str, str] | None = None,
                              detail: Mapping[str, Any] | None = None,
                              probe_failed: bool = False, extra_attempt: bool = False,
                              checkpoint_patch: Mapping[str, Any] | None = None,
                              drop_checkpoint: Sequence[str] = ()) -> bool:
    """Retry (status pending), defer (deferred, attempt refunded) or fail one job; a
    failure's escalation record is written in the same transaction. ``extra_attempt``:
    one more attempt than its budget; ``checkpoint_patch``/``drop_checkpoint``: plain
    checkpoint keys set/removed with it."""
    async with conn.transaction():
        row = await sql.afetch_one(conn, "finish_unsuccessful", {
            "id": job["id"], "worker": worker, "status": status, "error": error,
            "run_at": run_at, "refund": 1 if refund_attempt else 0, "now": clock.now(),
            "probe": 1 if probe_failed else 0, "extra": 1 if extra_attempt else 0,
            "cp_patch": Jsonb(dict(checkpoint_patch)) if checkpoint_patch else None,
            "cp_drop": list(drop_checkpoint),
            "detail": Jsonb(dict(detail)) if detail else None})
        if row is None:
            return False
        if escalation is not None:
            kind, reason = escalation
            # a changed page can recur within one (refunded) attempt: told each time
            await sql.afetch(conn, "insert_escalation_again" if kind == "portal_changed"
                             else "insert_escalation", {
                "job_id": job["id"], "attempt": row["attempts"], "kind": kind,
                "reason": reason, "now": clock.now()})
        return True


async def heartbeat(conn: AConn, *, worker: str, ids: Sequence[int]) -> set[int]:
    """Refresh heartbeats; returns the ids still held (a missing one was taken away)."""
    if not ids:
        return set()
    rows = await sql.afetch(conn, "heartbeat", {"ids": list(ids), "worker": worker,
                                                "now": clock.now()})
    return {r["id"] for r in rows}


async def save_checkpoint(conn: AConn, *, job_id: int, worker: str,
                          data: Mapping[str, Any]) -> dict[str, Any] | None:
    row = await sql.afetch_one(conn, "save_checkpoint", {
        "id": job_id, "worker": worker, "data": Jsonb(dict(data)), "now": clock.now()})
    return row["checkpoint"] if row else None


async def release(conn: AConn, *, worker: str, ids: Sequence[int]) -> set[int]:
    if not ids:
        return set()
    rows = await sql.afetch(conn, "release", {"ids": list(ids), "worker": worker,
                                              "now": clock.now()})
    return {r["id"] for r in rows}


async def store_document(conn: AConn, *, job_id: int, name: str, content_type: str,
                         data: bytes) -> None:
    """Store a document sealed (its own data key; documents such as a CP 575 letter carry
    personal data)."""
    key_id, blob = crypto.seal_blob(data)
    await sql.afetch(conn, "store_document", {"job_id": job_id, "name": name,
                                              "content_type": content_type, "data": blob,
                                              "key_id": key_id, "now": clock.now()})


async def documents_of(conn: AConn, job_id: int) -> list[tuple[str, str, bytes]]:
    rows = await sql.afetch(conn, "documents_of", {"job_id": job_id})
    return [(r["name"], r["content_type"],
             crypto.open_blob(r["key_id"], r["data"]) if r["key_id"] else bytes(r["data"]))
            for r in rows]


async def add_artifact(conn: AConn, *, job_id: int, attempt: int, kind: str, path: str,
                       note: str | None = None) -> None:
    await sql.afetch(conn, "add_artifact", {"job_id": job_id, "attempt": attempt, "kind": kind,
                                            "path": path, "note": note, "now": clock.now()})


# -- maintenance (run by one node at a time) ----------------------------------------------
async def leader_session(conn: AConn, *, stale_after: float) -> None:
    """Keepalives for the leader's own session: the server must notice soon that a leader
    cut off by a partition is gone (default TCP keepalives take hours), so another node
    takes over its duties (rescues among them)."""
    for setting, value in (("tcp_keepalives_idle", max(1, int(stale_after / 4))),
                           ("tcp_keepalives_interval", max(1, int(stale_after / 8))),
                           ("tcp_keepalives_count", 2),
                           ("tcp_user_timeout", max(1000, int(stale_after * 500)))):
        await conn.execute(psql.SQL("SET {} = {}").format(psql.Identifier(setting),
                                                           psql.Literal(value)))


async def try_lead(conn: AConn) -> bool:
    """Take the leader's session lock if no other node holds it."""
    row = await sql.afetch_one(conn, "try_leader_lock", {"lock": int(LockKey.LEADER)})
    return bool(row and row["leader"])


async def ping(conn: AConn) -> None:
    await sql.afetch(conn, "ping")


async def rescue_stale(conn: AConn, *, stale_after: timedelta, worker: str = "rescuer",
                       limit: int = 500, crash_limit: int = 3) -> list[tuple[int, str]]:
    """Jobs whose worker died: back to the queue (the attempt refunded, the crash counted),
    or to ``failed`` (and a human) -- see :func:`rescue_decision`. A heartbeat is judged
    from the later of its time and the server's start: after a PostgreSQL restart every
    live node needs a moment to reconnect, and is not rescued for it. One row that cannot
    be handled is logged on the job and skipped; the others proceed. Returns (id, new
    status) pairs."""
    now = clock.now()
    out: list[tuple[int, str]] = []
    stale = await sql.afetch(conn, "stale_running", {"stale_before": now - stale_after,
                                                     "limit": limit})
    for row in stale:
        try:
            async with conn.transaction():
                status = await _rescue_one(conn, row, worker, now, crash_limit)
        except Exception as exc:  # noqa: BLE001 - one bad row never stops the others
            status = None
            log.error("stale job %s not rescued: %s: %s", row["id"], type(exc).__name__,
                      str(exc).splitlines()[0][:200] if str(exc) else "")
            with contextlib.suppress(Exception):
                await sql.afetch(conn, "rescue_skipped", {
                    "id": row["id"], "error": f"rescue failed: {type(exc).__name__}",
                    "now": now})
        if status is not None:
            out.append((row["id"], status))
    return out


async def _rescue_one(conn: AConn, row: Mapping[str, Any], worker: str, now: datetime,
                      crash_limit: int) -> str | None:
    locked = await sql.afetch_one(conn, "lock_stale", {"id": row["id"],
                                                       "heartbeat_at": row["heartbeat_at"]})
    if locked is None:
        return None   # it heart-beat meanwhile, or another rescuer took it
    try:
        reconcilable = types.get(row["job_type"]).reconcilable
    except Exception:  # noqa: BLE001 - an unknown (removed) type: a human decides
        reconcilable = False
    status, escalation = rescue_decision(locked, reconcilable=reconcilable,
                                         crash_limit=crash_limit)
    error = f"worker {row['lock_owner']} stopped heart-beating"
    # in doubt on a portal with a lookup: the last lookup's answer may predate the filing
    drop = list(LOOKUP_ANSWERS) if reconcilable and past_point_of_no_return(
        locked["checkpoint"]) else []
    upd = await sql.afetch_one(conn, "rescue", {"id": row["id"], "status": status,
                                                "error": error, "worker": worker, "now": now,
                                                "cp_drop": drop})
    if upd and escalation:
        await sql.afetch(conn, "insert_escalation", {
            "job_id": row["id"], "attempt": upd["attempts"], "kind": escalation[0],
            "reason": escalation[1], "now": now})
    return status if upd else None


async def prune_finished(conn: AConn, *, older_than: timedelta,
                         failed_older_than: timedelta | None = None,
                         limit: int = 10_000) -> int:
    """Delete completed/cancelled jobs finished ``older_than`` ago, and failed ones
    ``failed_older_than`` ago (None: failed jobs are kept), a batch per call. A batch that
    cannot be deleted (a row something else still refers to) is done row by row instead:
    the rows that can go, go; the others are reported (:class:`PruneIncomplete`)."""
    now = clock.now()
    failed_before = now - failed_older_than if failed_older_than is not None else (
        datetime.min.replace(tzinfo=now.tzinfo))
    params = {"before": now - older_than, "failed_before": failed_before, "limit": limit}
    try:
        async with conn.transaction():
            row = await sql.afetch_one(conn, "prune_finished", params)
        return int(row["pruned"]) if row else 0
    except psycopg.errors.IntegrityError:
        pass
    pruned, stuck = 0, []
    for cand in await sql.afetch(conn, "prune_candidates", params):
        try:
            async with conn.transaction():
                row = await sql.afetch_one(conn, "prune_one", {"id": cand["id"]})
            pruned += int(row["pruned"]) if row else 0
        except psycopg.errors.IntegrityError:
            stuck.append(cand["id"])
    if stuck:
        raise PruneIncomplete(pruned, stuck)
    return pruned


async def prune_within(conn: AConn, *, older_than: timedelta,
                       failed_older_than: timedelta | None = None, budget_seconds: float,
                       limit: int = 10_000) -> int:
    """:func:`prune_finished` batch after batch while batches come back full, for at most
    ``budget_seconds``: one batch per tick would cap retention at ``limit`` jobs per tick
    (about 167 finished jobs/s at the default 60 s tick), and the table would grow for good
    above that rate. Each batch is its own transaction, so claims never wait long."""
    deadline = time.monotonic() + budget_seconds
    total = 0
    while True:
        try:
            n = await prune_finished(conn, older_than=older_than,
                                     failed_older_than=failed_older_than, limit=limit)
        except PruneIncomplete as exc:
            raise PruneIncomplete(total + exc.pruned, exc.stuck) from None
        total += n
        if n < limit or time.monotonic() >= deadline:
            return total


class PruneIncomplete(Exception):
    """Some finished jobs could not be pruned (the others were)."""

    def __init__(self, pruned: int, stuck: list[int]) -> None:
        super().__init__(f"{pruned} pruned; {len(stuck)} could not be deleted "
                         f"(jobs {', '.join(map(str, stuck[:10]))})")
        self.pruned = pruned
        self.stuck = stuck


async def erase_failed_secrets(conn: AConn, *, older_than: timedelta,
                               limit: int = 10_000) -> int:
    """Erase the sealed secrets of jobs failed ``older_than`` ago (crypto-shredding)."""
    now = clock.now()
    row = await sql.afetch_one(conn, "erase_failed_secrets", {
        "before": now - older_than, "now": now, "limit": limit})
    return int(row["erased"]) if row else 0

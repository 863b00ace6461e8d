"""Jobs waiting on portals (issue 38): what 10,000 of them cost the queue.

    python bench/waiting_bench.py --embedded          # portalq's embedded PostgreSQL
    python bench/waiting_bench.py                     # a server on $PGPORT (55434)
    WAIT_JOBS=10000 DRAIN_JOBS=5000 WAIT_ROUNDS=3 python bench/waiting_bench.py --embedded

A job waiting on a portal is an ordinary deferred job: its checkpoint holds the waiting
marker and its ``run_at`` is its next status check, spaced by the portal's declared rule
(``portals.lookups``: Delaware every 15 min backing off to 4 h, BC every 30 min to 4 h, the
CRTC every hour to 12 h). The bench fills WAIT_JOBS (10,000) such jobs, spread over the
four rules with a random number of checks already made (so their next checks lie between
15 min and 12 h ahead), then measures, in the same run, with them and without them:

1. Drain of DRAIN_JOBS other jobs (no-op, another portal): ``worker_api.claim`` (batches
   of 50, as a worker with both portals open claims) then ``complete_many``; claim
   latency (median, p95) and jobs/s. WAIT_ROUNDS rounds, alternating with/without (the
   waiting jobs are deleted for "without", enqueued again for "with").
2. The tick (``scheduler.tick.Tick.duties()``) with the waiting jobs in the table.
3. The checks' schedule: how many checks fall due in the busiest minute of the next 12 h
   (bounded by the rules), and the cost of claiming the due ones: the claim run at instants
   an hour and 12 h ahead, until nothing is due (claims/s, DB ms a claim).

No worker slot is held by a waiting job: it is ``deferred`` (counted here: running = 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel

from portalq.jobs import clock, types, waiting, worker_api
from portalq.jobs.queue import NewJob, enqueue_many

DB = os.environ.get("WAIT_DB", "portalq_waitbench")
WAIT_JOBS = int(os.environ.get("WAIT_JOBS", "10000"))
DRAIN_JOBS = int(os.environ.get("DRAIN_JOBS", "5000"))
ROUNDS = int(os.environ.get("WAIT_ROUNDS", "3"))
BATCH = 50
WAITING, OTHER = "waitbench", "drainbench"
WAIT_TYPE, OTHER_TYPE = "wait_noop", "drain_noop"


class _Payload(BaseModel):
    pass


types.register(types.JobType(WAIT_TYPE, _Payload, WAITING))
types.register(types.JobType(OTHER_TYPE, _Payload, OTHER))


def rules() -> list[waiting.LookupRule]:
    from portalq.portals import lookups

    return list(lookups.RULES.values())


def _server(embedded: bool) -> tuple[str, Any]:
    if embedded:
        from portalq.jobs.db.embedded import EmbeddedPostgres

        pg = EmbeddedPostgres(Path(tempfile.gettempdir()) / "portalq-waitbench")
        pg.ensure_running()
        return pg.dsn("postgres"), pg
    host, port = os.environ.get("PGHOST", "127.0.0.1"), os.environ.get("PGPORT", "55434")
    return f"postgresql://{os.environ.get('PGUSER', 'postgres')}@{host}:{port}/postgres", None


def prepare(admin_dsn: str) -> str:
    from portalq.jobs.db.migrate import upgrade

    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{DB}"')
    head, _, tail = admin_dsn.rpartition("/postgres")
    dsn = f"{head}/{DB}{tail}"
    upgrade(dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    with psycopg.connect(dsn, autocommit=True) as c:
        for code in (WAITING, OTHER):   # open 24/7: only run_at keeps a waiting job back
            c.execute("INSERT INTO portalq.portals (code, name, timezone, "
                      "max_concurrent_sessions) VALUES (%s, %s, 'UTC', NULL)", (code, code))
            c.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                      "SELECT %s, d, '00:00', '00:00' FROM generate_series(0, 6) d", (code,))
    return dsn


def fill_waiting(dsn: str, now: datetime, rng: random.Random) -> list[datetime]:
    """WAIT_JOBS deferred jobs, each with a waiting marker and its next check; returns the
    next checks."""
    all_rules = rules()
    with psycopg.connect(dsn, autocommit=True) as c:
        ids: list[int] = []
        for off in range(0, WAIT_JOBS, 1000):
            rows = enqueue_many([NewJob(WAIT_TYPE, f"w{off + i}-{rng.random()}")
                                 for i in range(min(1000, WAIT_JOBS - off))], conn=c)
            ids += [r.id for r in rows]
        marks, when = [], []
        for _ in ids:
            rule = rng.choice(all_rules)
            checks = rng.randrange(0, 8)
            # the interval after that many checks (the rule's, backed off), at a random phase
            interval = rule.next_check(checks, now) - now
            nxt = now + max(interval * rng.random(), timedelta(seconds=1))
            since = now - rule.check_every * checks
            mark = waiting.waiting(None, rule, since=since, now=nxt - interval, what="bench")
            mark.update(checks=checks + 1, next_check=nxt.isoformat())
            marks.append(mark)
            when.append(nxt)
        with c.cursor() as cur:
            cur.executemany(
                "UPDATE portalq.job_queue SET status = 'deferred', run_at = %s, "
                "checkpoint = %s WHERE id = %s",
                [(w, Jsonb({waiting.KEY: m}), i) for w, m, i in zip(when, marks, ids,
                                                                      strict=True)])
        c.execute("ANALYZE portalq.job_queue")
    return when


def fill_other(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        for off in range(0, DRAIN_JOBS, 1000):
            enqueue_many([NewJob(OTHER_TYPE, f"d{off + i}-{time.monotonic_ns()}")
                          for i in range(min(1000, DRAIN_JOBS - off))], conn=c)
        c.execute("ANALYZE portalq.job_queue")


def drop(dsn: str, job_type: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DELETE FROM portalq.job_queue WHERE job_type = %s", (job_type,))
        c.execute("VACUUM ANALYZE portalq.job_queue")


async def drain(dsn: str) -> dict[str, float]:
    caps = [worker_api.Capacity(WAITING, None), worker_api.Capacity(OTHER, None)]
    lat: list[float] = []
    done = checks = 0
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        t0 = time.perf_counter()
        while True:
            c0 = time.perf_counter()
            jobs = await worker_api.claim(conn, worker="bench", capacities=caps, limit=BATCH)
            lat.append((time.perf_counter() - c0) * 1000.0)
            if not jobs:
                break
            # a waiting job that came due meanwhile is checked: deferred to its next check
            for j in (j for j in jobs if j["job_type"] == WAIT_TYPE):
                checks += 1
                await worker_api.finish_unsuccessful(
                    conn, job=j, worker="bench", status="deferred", error="waiting",
                    run_at=clock.now() + timedelta(hours=24), refund_attempt=True)
            others = [(j["id"], None) for j in jobs if j["job_type"] == OTHER_TYPE]
            await worker_api.complete_many(conn, worker="bench", results=others)
            done += len(others)
        dt = time.perf_counter() - t0
    lat.sort()
    return {"jobs": done, "checks": checks, "jobs_s": done / dt,
            "claim_med": statistics.median(lat),
            "claim_p95": lat[int(len(lat) * 0.95) - 1]}


async def tick_ms(dsn: str) -> list[float]:
    from psycopg_pool import AsyncConnectionPool

    from portalq.scheduler.config import Settings
    from portalq.scheduler.tick import Tick
    from portalq.scheduler.worker import Worker

    pool = AsyncConnectionPool(dsn, min_size=2, max_size=4, open=False,
                               kwargs={"autocommit": True})
    await pool.open(wait=True)
    try:
        worker = Worker(Settings(database_url=dsn, admin_emails=""), pool, dsn)
        await worker.refresh_portals()
        tick = Tick(Settings(database_url=dsn, admin_emails=""), worker, dsn)
        for _ in range(3):
            await tick.duties()
        out = []
        for _ in range(9):
            t0 = time.perf_counter()
            await tick.duties()
            out.append((time.perf_counter() - t0) * 1000.0)
        await tick.close()
        return out
    finally:
        await pool.close()


async def claim_due(dsn: str, at: datetime) -> dict[str, float]:
    """Claim every check due by ``at`` (batches of BATCH) and defer each again as a check
    that found the portal undecided does: checks/s and ms a claim."""
    caps = [worker_api.Capacity(WAITING, None)]
    n, calls, claim_s = 0, 0, 0.0
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        t0 = time.perf_counter()
        while True:
            c0 = time.perf_counter()
            jobs = await worker_api.claim(conn, worker="bench", capacities=caps, limit=BATCH,
                                          now=at)
            claim_s += time.perf_counter() - c0
            if not jobs:
                break
            n += len(jobs)
            calls += 1
            # checked, still undecided: deferred to its next check, attempt refunded (the
            # outcome policy's path for a WaitOnPortal)
            for j in jobs:
                await worker_api.finish_unsuccessful(
                    conn, job=j, worker="bench", status="deferred", error="waiting",
                    run_at=at + timedelta(hours=24), refund_attempt=True)
        dt = time.perf_counter() - t0
    return {"due": n, "checks_s": n / dt if dt else 0.0,
            "claim_ms": claim_s * 1000.0 / max(calls + 1, 1),
            "defer_ms": (dt - claim_s) * 1000.0 / max(n, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedded", action="store_true")
    args = ap.parse_args()
    admin_dsn, pg = _server(args.embedded)
    rng = random.Random(38)
    try:
        dsn = prepare(admin_dsn)
        now = clock.now()
        with_, without = [], []
        when = fill_waiting(dsn, now, rng)
        for r in range(ROUNDS):
            for present in ((True, False) if r % 2 == 0 else (False, True)):
                if present and not _count(dsn, WAIT_TYPE):
                    now = clock.now()
                    when = fill_waiting(dsn, now, rng)
                if not present and _count(dsn, WAIT_TYPE):
                    drop(dsn, WAIT_TYPE)
                fill_other(dsn)
                (with_ if present else without).append(asyncio.run(drain(dsn)))
                drop(dsn, OTHER_TYPE)
        drop(dsn, WAIT_TYPE)   # afresh: the schedule below starts now
        now = clock.now()
        when = fill_waiting(dsn, now, rng)
        running = _count(dsn, WAIT_TYPE, "running")
        ticks = asyncio.run(tick_ms(dsn))
        per_minute: dict[int, int] = {}
        for w in when:
            per_minute[int((w - now).total_seconds() // 60)] = \
                per_minute.get(int((w - now).total_seconds() // 60), 0) + 1
        hour = asyncio.run(claim_due(dsn, now + timedelta(hours=1)))
        rest = asyncio.run(claim_due(dsn, now + timedelta(hours=12, minutes=1)))
        with psycopg.connect(dsn) as c:
            version = c.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    finally:
        if pg is not None:
            pg.stop()

    def med(rows: list[dict[str, float]], k: str) -> float:
        return statistics.median(r[k] for r in rows)

    print(f"\n== waiting bench: {os.cpu_count()} CPUs, Postgres {version}, {WAIT_JOBS:,} "
          f"jobs waiting, {DRAIN_JOBS:,} others drained, {ROUNDS} rounds (medians)")
    for k, label in (("jobs_s", "drain jobs/s"), ("claim_med", "claim ms (median)"),
                     ("claim_p95", "claim ms (p95)")):
        a, b = med(with_, k), med(without, k)
        print(f"{label:28s} with {a:9.2f}   without {b:9.2f}   ({(a / b - 1) * 100:+.1f} %)")
    print(f"{'checks due during the drains':28s} "
          f"{sum(int(r['checks']) for r in with_)} (made, deferred again)")
    print(f"{'waiting jobs running':28s} {running} (deferred: no worker slot)")
    print(f"{'Tick.duties() ms':28s} median {statistics.median(ticks):.1f} "
          f"({min(ticks):.1f}-{max(ticks):.1f})")
    print(f"{'checks due, busiest minute':28s} {max(per_minute.values())} "
          f"(of {WAIT_JOBS:,} over {max(per_minute) + 1} min)")
    for label, r in (("checks due within 1 h", hour), ("the rest, within 12 h", rest)):
        print(f"{label:28s} {r['due']:,}: {r['checks_s']:,.0f} checks/s; claim "
              f"{r['claim_ms']:.1f} ms a batch of {BATCH}, deferral {r['defer_ms']:.1f} ms a "
              "check")


def _count(dsn: str, job_type: str, status: str | None = None) -> int:
    with psycopg.connect(dsn) as c:
        row = c.execute("SELECT count(*) FROM portalq.job_queue WHERE job_type = %s AND "
                        "(%s::text IS NULL OR status = %s)", (job_type, status, status)
                        ).fetchone()
    return int(row[0]) if row else 0


if __name__ == "__main__":
    sys.exit(main())

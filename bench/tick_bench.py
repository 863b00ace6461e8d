"""portalq's own figures, which the peers have no counterpart for: the maintenance tick.

    python bench/tick_bench.py                   # the harness's server on $PGPORT (55434)
    python bench/tick_bench.py --embedded        # portalq's embedded PostgreSQL instead
    TICK_JOBS=100000 TICK_RUNS=9 TICK_WARMUP=3 python bench/tick_bench.py

1. Bulk deferral: TICK_JOBS (100,000) due jobs of a closed portal (enqueued through
   ``jobs.queue.enqueue_many``, batches of 1,000) are deferred to its next opening by
   ``jobs.worker_api.defer_portal`` -- batches of 10,000 per statement, as the tick runs it.
2. The tick with those TICK_JOBS deferred jobs in the table: ``scheduler.tick.Tick`` with a
   real ``scheduler.worker.Worker`` (pool, calendars) -- ``duties()`` (defer closed portals,
   rescue stale jobs, escalations, prune, per-portal counts) and ``run()`` (calendar
   refresh + leader check + duties); median of TICK_RUNS after TICK_WARMUP ticks (a
   service ticks every minute: prepared statements and plans are warm), plus each
   statement alone.
   Measured right after the deferral (no VACUUM yet) and after VACUUM ANALYZE (the state
   autovacuum brings the table to).

The closed portal ``tickbench`` is open 24/7 but has a one-off closure covering the next
week, so it is closed now and its next opening is the closure's end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from pydantic import BaseModel

from portalq.jobs import clock, types, worker_api
from portalq.jobs.db import sql
from portalq.jobs.queue import NewJob, enqueue_many

DB = os.environ.get("TICK_DB", "portalq_tick")
JOBS = int(os.environ.get("TICK_JOBS", "100000"))
RUNS = int(os.environ.get("TICK_RUNS", "9"))
WARMUP = int(os.environ.get("TICK_WARMUP", "3"))
PORTAL = "tickbench"
JOB_TYPE = "tick_noop"


class _Payload(BaseModel):
    pass


types.register(types.JobType(JOB_TYPE, _Payload, PORTAL))


def _server(embedded: bool) -> tuple[str, Any]:
    """(dsn of the postgres database, embedded server or None)."""
    if embedded:
        from portalq.jobs.db.embedded import EmbeddedPostgres

        pg = EmbeddedPostgres(Path(tempfile.gettempdir()) / "portalq-tickbench")
        pg.ensure_running()
        return pg.dsn("postgres"), pg
    host = os.environ.get("PGHOST", "127.0.0.1")
    port = os.environ.get("PGPORT", "55434")
    user = os.environ.get("PGUSER", "postgres")
    return f"postgresql://{user}@{host}:{port}/postgres", None


def _db_dsn(admin_dsn: str, db: str) -> str:
    head, _, tail = admin_dsn.rpartition("/postgres")   # .../postgres[?host=...]
    return f"{head}/{db}{tail}"


def prepare(admin_dsn: str) -> str:
    from portalq.jobs.db.migrate import upgrade

    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{DB}"')
    dsn = _db_dsn(admin_dsn, DB)
    upgrade(dsn.replace("postgresql://", "postgresql+psycopg://", 1))   # as `portalq migrate`
    from portalq.scheduler.calendar_cache import store_holidays

    store_holidays(dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    now = clock.now()
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("INSERT INTO portalq.portals (code, name, timezone, max_concurrent_sessions) "
                  "VALUES (%s, %s, 'UTC', NULL)", (PORTAL, PORTAL))
        c.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                  "SELECT %s, d, '00:00', '00:00' FROM generate_series(0, 6) d", (PORTAL,))
        c.execute("INSERT INTO portalq.portal_closures "
                  "(portal, starts_at, ends_at, reason, created_at) "
                  "VALUES (%s, %s, %s, 'tick bench', %s)",
                  (PORTAL, now - timedelta(hours=1), now + timedelta(days=7), now))
    return dsn


def fill(dsn: str) -> float:
    with psycopg.connect(dsn, autocommit=True) as c:
        t0 = time.perf_counter()
        for off in range(0, JOBS, 1000):
            enqueue_many([NewJob(JOB_TYPE, f"o{off + i}") for i in range(min(1000, JOBS - off))],
                         conn=c)
        dt = time.perf_counter() - t0
        c.execute("ANALYZE portalq.job_queue")
        c.execute("CHECKPOINT")
    return dt


async def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    await fn()
    return (time.perf_counter() - t0) * 1000.0


async def measure(dsn: str) -> dict[str, Any]:
    from psycopg_pool import AsyncConnectionPool

    from portalq.scheduler import calendar_cache as calendars
    from portalq.scheduler.config import Settings
    from portalq.scheduler.tick import Tick
    from portalq.scheduler.worker import Worker

    out: dict[str, Any] = {}
    settings = Settings(database_url=dsn, admin_emails="")
    pool = AsyncConnectionPool(dsn, min_size=2, max_size=4, open=False,
                               kwargs={"autocommit": True})
    await pool.open(wait=True)
    try:
        worker = Worker(settings, pool, dsn)
        await worker.refresh_portals()
        tick = Tick(settings, worker, dsn)
        portal = worker.portals[PORTAL]
        now = clock.now()
        assert not calendars.startable(portal, now), "the bench portal should be closed"
        when = calendars.next_startable(portal, now)
        assert when is not None

        async with pool.connection() as conn:
            t0 = time.perf_counter()
            n = await worker_api.defer_portal(conn, portal=PORTAL, next_open=when,
                                              reason="closed")
            out["defer_ms"] = (time.perf_counter() - t0) * 1000.0
            out["deferred"] = n
        assert n == JOBS, f"deferred {n} of {JOBS}"

        async def series(label: str) -> None:
            for _ in range(WARMUP):        # warm-up: prepared statements, plans, caches
                await tick.duties()
            out[f"{label}.duties"] = [await _timed(tick.duties) for _ in range(RUNS)]
            out[f"{label}.run"] = [await _timed(tick.run) for _ in range(RUNS)]
            parts: dict[str, list[float]] = {}
            async with pool.connection() as conn:
                for _ in range(RUNS):
                    t = clock.now()

                    async def defer(conn: Any = conn, t: Any = t) -> None:
                        await worker_api.defer_portal(conn, portal=PORTAL,
                                                      next_open=when, reason="closed")

                    async def rescue(conn: Any = conn) -> None:
                        await worker_api.rescue_stale(
                            conn, stale_after=timedelta(seconds=settings.stale_after_seconds))

                    async def prune(conn: Any = conn) -> None:
                        await worker_api.prune_finished(
                            conn, older_than=timedelta(days=settings.retention_days))

                    async def counts(conn: Any = conn) -> None:
                        await sql.afetch(conn, "count_by_portal_status")

                    for name, fn in (("defer_portal (0 due)", defer), ("rescue_stale", rescue),
                                     ("prune_finished", prune),
                                     ("count_by_portal_status", counts)):
                        parts.setdefault(name, []).append(await _timed(fn))
            out[f"{label}.parts"] = parts

        await series("cold")
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("VACUUM ANALYZE")    # the whole database: no autovacuum left to run
        await series("vacuumed")
        await tick.close()
    finally:
        await pool.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedded", action="store_true", help="use portalq's embedded server")
    ap.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = ap.parse_args()
    admin_dsn, pg = _server(args.embedded)
    dsn = prepare(admin_dsn)
    try:
        fill_s = fill(dsn)
        res = asyncio.run(measure(dsn))
        with psycopg.connect(dsn) as c:
            version = c.execute("SHOW server_version").fetchone()[0]
    finally:
        if not args.keep:
            with psycopg.connect(admin_dsn, autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        if pg is not None:
            pg.stop()

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):8.1f}  ({min(xs):.1f}-{max(xs):.1f})"

    print(f"\n== portalq tick bench: {os.cpu_count()} CPUs, Postgres {version}, "
          f"{JOBS:,} jobs, median (min-max) of {RUNS} ticks, ms")
    print(f"{'enqueue_many, batches of 1,000 (fill, s)':48s} {fill_s:8.2f}  "
          f"({JOBS / fill_s:,.0f} jobs/s)")
    print(f"{'bulk deferral of the due jobs (batches)':48s} {res['defer_ms']:8.1f}  "
          f"({res['deferred']:,} jobs, {res['deferred'] / res['defer_ms'] * 1000:,.0f} jobs/s)")
    for label, title in (("cold", "right after the deferral"),
                         ("vacuumed", "after VACUUM ANALYZE")):
        print(f"-- tick with {JOBS:,} deferred jobs, {title}")
        print(f"{'  Tick.duties()':48s} {med(res[f'{label}.duties'])}")
        print(f"{'  Tick.run() (calendars + leader + duties)':48s} {med(res[f'{label}.run'])}")
        for name, xs in res[f"{label}.parts"].items():
            print(f"{'    ' + name:48s} {med(xs)}")


if __name__ == "__main__":
    sys.exit(main())

"""Sealing secrets at rest: enqueue and drain with encryption on and off, in the same run.

Two job types with the same payload model (a responsible party with an SSN, like
``obtain_ein``); ``bench_sealed`` declares ``ssn`` a secret field (sealed at enqueue with a
per-job data key, opened for the handler, erased at completion), ``bench_plain`` does not.
Rounds alternate plain/sealed so drift of the machine hits both alike; medians reported.

    .venv/bin/python bench/secrets_bench.py            # embedded server in /tmp/pq-secrets-bench
    PQ_ROUNDS=5 PQ_SINGLE=2000 PQ_BATCH_N=20000 PQ_DRAIN_N=5000 ...
    PQ_MODES=single,batch ...                          # only these measures

Measured: single enqueue (one job per call, autocommit), batch enqueue (enqueue_many of 500:
the COPY path), drain (the Worker's loops as serve() wires them, workers=50, a no-op
handler that reads ctx.payload) -- jobs/s each, and the client process's CPU time per job
(median and least of the rounds: on a shared machine other processes only ever add to it).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from jobs import types  # noqa: E402
from jobs.queue import NewJob, enqueue, enqueue_many  # noqa: E402

ROUNDS = int(os.environ.get("PQ_ROUNDS", "3"))
SINGLE = int(os.environ.get("PQ_SINGLE", "1000"))
BATCH_N = int(os.environ.get("PQ_BATCH_N", "10000"))
DRAIN_N = int(os.environ.get("PQ_DRAIN_N", "3000"))
#: which measures to run (comma-separated): single, batch, drain
MODES = [m.strip() for m in os.environ.get("PQ_MODES", "single,batch,drain").split(",")
         if m.strip()]
PORTAL = "bench"


class Party(BaseModel):
    name: str
    ssn: str


class Payload(BaseModel):
    legal_name: str
    party: Party


types.register(types.JobType("bench_plain", Payload, PORTAL))
types.register(types.JobType("bench_sealed", Payload, PORTAL, secret_fields=("party.ssn",)))


def payload(i: int) -> dict[str, Any]:
    return {"legal_name": f"Widgets {i} LLC",
            "party": {"name": "Ada Lovelace", "ssn": f"9{i % 100:02d}-{i % 89:02d}-{i % 9973:04d}"}}


def setup() -> str:
    from jobs.embedded import EmbeddedPostgres
    from jobs.migrate import upgrade

    home = Path(os.environ.get("PQ_BENCH_HOME", "/tmp/pq-secrets-bench"))
    os.environ["PORTALQ_HOME"] = str(home)
    os.environ.setdefault("PORTALQ_KEY_FILE", str(home / "keys.json"))
    pg = EmbeddedPostgres(home)
    pg.ensure_running()
    with psycopg.connect(pg.dsn("postgres"), autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS secrets_bench WITH (FORCE)")
        c.execute("CREATE DATABASE secrets_bench")
    pg.grant_app("secrets_bench")
    url = pg.url("secrets_bench")
    upgrade(url)
    with psycopg.connect(pg.dsn("secrets_bench"), autocommit=True) as c:
        c.execute("INSERT INTO portals (code, name, timezone, max_concurrent_sessions) "
                  "VALUES (%s, %s, 'UTC', NULL)", (PORTAL, PORTAL))
        c.execute("INSERT INTO portal_hours (portal, weekday, opens, closes) "
                  "SELECT %s, d, '00:00', '00:00' FROM generate_series(0, 6) d", (PORTAL,))
    os.environ["PORTALQ_DATABASE_URL"] = url
    return url


def _conn(url: str) -> psycopg.Connection[Any]:
    from jobs.database import libpq_dsn

    return psycopg.connect(libpq_dsn(url), autocommit=True)


def _clear(url: str) -> None:
    with _conn(url) as c:
        # emptied to new files: deleted rows (a drain's events, every round's jobs) left
        # behind, even vacuumed, slowed every later round (a run's drain rounds fell from
        # 9,345 to ~3,000 jobs/s while job_queue grew to 68 MB for 3,000 rows)
        c.execute("TRUNCATE job_queue CASCADE")   # and the tables that refer to it
        c.execute("ANALYZE job_queue, job_events")


CPU: dict[tuple[str, str], list[float]] = {}   # client CPU microseconds per job
WAL: dict[tuple[str, str], list[float]] = {}   # WAL bytes per job (server, exact)


def _lsn(c: psycopg.Connection[Any]) -> str:
    return str(c.execute("SELECT pg_current_wal_lsn()").fetchone()[0])


def _wal_since(c: psycopg.Connection[Any], lsn: str) -> float:
    return float(c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
                           (lsn,)).fetchone()[0])


def bench_single(url: str, job_type: str) -> float:
    with _conn(url) as c:
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(SINGLE):
            enqueue(job_type, "bench", payload(i), conn=c)
        CPU.setdefault(("single", job_type), []).append(
            (time.process_time() - c0) / SINGLE * 1e6)
        return SINGLE / (time.perf_counter() - t0)


def bench_batch(url: str, job_type: str) -> float:
    with _conn(url) as c:
        lsn = _lsn(c)
        t0, c0 = time.perf_counter(), time.process_time()
        for off in range(0, BATCH_N, 500):
            enqueue_many([NewJob(job_type, "bench", payload(off + i)) for i in range(500)],
                         conn=c)
        CPU.setdefault(("batch", job_type), []).append(
            (time.process_time() - c0) / BATCH_N * 1e6)
        rate = BATCH_N / (time.perf_counter() - t0)
        WAL.setdefault(("batch", job_type), []).append(_wal_since(c, lsn) / BATCH_N)
        return rate


async def _drain(url: str) -> float:
    from jobs.database import libpq_dsn
    from scheduler.config import Settings
    from scheduler.worker import Worker, make_pool

    settings = Settings(database_url=url, workers=50)
    dsn = libpq_dsn(url)
    pool = make_pool(settings, dsn)
    await pool.open(wait=True, timeout=60)
    worker = Worker(settings, pool, dsn)
    await worker.refresh_portals()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        lsn = (await (await c.execute("SELECT pg_current_wal_lsn()")).fetchone())[0]
        t0, c0 = time.perf_counter(), time.process_time()
        loops = worker.start_loops()
        while True:
            row = await (await c.execute(
                "SELECT count(*) FROM job_queue WHERE status <> 'completed'")).fetchone()
            if row[0] == 0:
                break
            await asyncio.sleep(0.02)
        rate = DRAIN_N / (time.perf_counter() - t0)
        cpu = (time.process_time() - c0) / DRAIN_N * 1e6
        wal = (await (await c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
                                      (lsn,))).fetchone())[0]
        LAST_DRAIN_WAL.append(float(wal) / DRAIN_N)
    await worker.stop_loops(loops, 5)
    LAST_DRAIN_CPU.append(cpu)
    await pool.close()
    return rate


LAST_DRAIN_CPU: list[float] = []
LAST_DRAIN_WAL: list[float] = []


def bench_drain(url: str, job_type: str) -> float:
    with _conn(url) as c:
        for off in range(0, DRAIN_N, 500):
            enqueue_many([NewJob(job_type, "bench", payload(off + i))
                          for i in range(min(500, DRAIN_N - off))], conn=c)
    rate = asyncio.run(_drain(url))
    CPU.setdefault(("drain", job_type), []).append(LAST_DRAIN_CPU.pop())
    WAL.setdefault(("drain", job_type), []).append(LAST_DRAIN_WAL.pop())
    return rate


def main() -> None:
    from scheduler.handlers import register_handler

    async def noop(ctx: Any) -> None:
        assert ctx.payload["party"]["ssn"]   # the opened payload, as a flow reads it

    register_handler("bench_plain", noop)
    register_handler("bench_sealed", noop)
    url = setup()
    results: dict[tuple[str, str], list[float]] = {}
    for r in range(ROUNDS):
        order = ("bench_plain", "bench_sealed") if r % 2 == 0 else ("bench_sealed", "bench_plain")
        for job_type in order:
            for name, fn in (("single", bench_single), ("batch", bench_batch),
                             ("drain", bench_drain)):
                if name not in MODES:
                    continue
                _clear(url)
                results.setdefault((name, job_type), []).append(fn(url, job_type))
    print(f"rounds={ROUNDS} single={SINGLE} batch={BATCH_N} (enqueue_many of 500, COPY) "
          f"drain={DRAIN_N} (workers=50)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    print(f"{'measure':<8} {'plain jobs/s':>13} {'sealed jobs/s':>14} {'sealed/plain':>13}"
          f"   {'CPU us/job plain':>16} {'sealed':>7}   {'min plain':>9} {'sealed':>7}"
          f" {'+':>6}")
    for name in MODES:
        plain = statistics.median(results[(name, "bench_plain")])
        sealed = statistics.median(results[(name, "bench_sealed")])
        cpu_p = statistics.median(CPU[(name, "bench_plain")])
        cpu_s = statistics.median(CPU[(name, "bench_sealed")])
        # the least CPU a round took: other processes' load only ever adds to it
        min_p, min_s = min(CPU[(name, "bench_plain")]), min(CPU[(name, "bench_sealed")])
        print(f"{name:<8} {plain:>13.0f} {sealed:>14.0f} {sealed / plain:>12.1%}"
              f"   {cpu_p:>16.1f} {cpu_s:>7.1f}   {min_p:>9.1f} {min_s:>7.1f}"
              f" {min_s / min_p - 1:>+6.1%}")
        print(f"         runs plain {[round(x) for x in results[(name, 'bench_plain')]]} "
              f"sealed {[round(x) for x in results[(name, 'bench_sealed')]]}")
        if (name, "bench_plain") in WAL:   # the background writer adds a little: the median
            wp = statistics.median(WAL[(name, "bench_plain")])
            ws = statistics.median(WAL[(name, "bench_sealed")])
            print(f"         WAL bytes/job plain {wp:.0f} sealed {ws:.0f} ({ws / wp - 1:+.1%})")


if __name__ == "__main__":
    main()

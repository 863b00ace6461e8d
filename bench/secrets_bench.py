"""Sealing secrets at rest: enqueue and drain with encryption on and off, in the same run.

Two job types with the same payload model; the sealed one declares its SSN a secret field
(sealed at enqueue, opened for the handler, erased at completion), the plain one does not.
``PQ_PAYLOAD=small`` (the default): a minimal payload (a legal name and a responsible party
with a name and an SSN) -- the least work per job around the seal, so its worst case.
``PQ_PAYLOAD=ein``: ``obtain_ein``'s own payload model, rate limit and secret fields
(portals.catalogue), with the demo order's values (a new SSN and name per job).
Rounds alternate plain/sealed so drift of the machine hits both alike; medians reported.

    .venv/bin/python bench/secrets_bench.py            # embedded server in /tmp/pq-secrets-bench
    PQ_ROUNDS=5 PQ_SINGLE=2000 PQ_BATCH_N=20000 PQ_DRAIN_N=5000 ...
    PQ_MODES=single,batch ...                          # only these measures
    PQ_PAYLOAD=ein ...                                 # obtain_ein's own payload and declaration

Measured: single enqueue (one job per call, autocommit) and batch enqueue (enqueue_many of
500: the COPY path), both interleaved call by call with the other type (:func:`_pairs`), and
drain (the Worker's loops as serve() wires them, workers=50, a no-op
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

from portalq.jobs import types  # noqa: E402
from portalq.jobs.queue import NewJob, enqueue, enqueue_many  # noqa: E402

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


def _ssn(i: int) -> str:
    return f"9{i % 100:02d}-{i % 89:02d}-{i % 9973:04d}"


def _small(i: int) -> dict[str, Any]:
    return {"legal_name": f"Widgets {i} LLC", "party": {"name": "Ada Lovelace", "ssn": _ssn(i)}}


def _ein(i: int) -> dict[str, Any]:
    return {"legal_structure": "LLC", "members": 1, "state": "DE", "reason": "NEW_BUSINESS",
            "responsible_party": {"first_name": "Mei", "last_name": "Tanaka", "ssn": _ssn(i)},
            "address": {"street": "1209 Orange Street", "city": "Wilmington", "region": "DE",
                        "postal_code": "19801"},
            "phone": "302-555-0199", "legal_name": f"Tanaka Robotics {i} LLC",
            "start_month": 12, "start_year": 2026, "principal_activity": "Robotics software",
            # the firm as the third-party designee: no PORTALQ_IRS_DESIGNEE_* needed
            "third_party_designee": {"name": "Bench Formation Services LLC",
                                     "phone": "302-555-0150",
                                     "address": {"street": "8 Filing Row", "city": "Dover",
                                                 "region": "DE", "postal_code": "19904"}}}


KIND = os.environ.get("PQ_PAYLOAD", "small")
if KIND == "ein":
    from portalq.portals import catalogue  # noqa: F401  (registers obtain_ein)
    from portalq.portals.irs.payload import ObtainEinPayload

    _EIN = types.get("obtain_ein")
    types.register(types.JobType("bench_plain", ObtainEinPayload, PORTAL,
                                 rate_limit=_EIN.rate_limit))
    types.register(types.JobType("bench_sealed", ObtainEinPayload, PORTAL,
                                 rate_limit=_EIN.rate_limit, secret_fields=_EIN.secret_fields))
    payload, PARTY = _ein, "responsible_party"
elif KIND == "small":
    types.register(types.JobType("bench_plain", Payload, PORTAL))
    types.register(types.JobType("bench_sealed", Payload, PORTAL,
                                 secret_fields=("party.ssn",)))
    payload, PARTY = _small, "party"
else:
    raise SystemExit(f"PQ_PAYLOAD must be small or ein, not {KIND!r}")


def setup() -> str:
    from portalq.jobs.db.embedded import EmbeddedPostgres
    from portalq.jobs.db.migrate import upgrade

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
        c.execute("INSERT INTO portalq.portals (code, name, timezone, max_concurrent_sessions) "
                  "VALUES (%s, %s, 'UTC', NULL)", (PORTAL, PORTAL))
        c.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                  "SELECT %s, d, '00:00', '00:00' FROM generate_series(0, 6) d", (PORTAL,))
    os.environ["PORTALQ_DATABASE_URL"] = url
    return url


def _conn(url: str) -> psycopg.Connection[Any]:
    from portalq.jobs.db.location import libpq_dsn

    return psycopg.connect(libpq_dsn(url), autocommit=True)


def _clear(url: str) -> None:
    with _conn(url) as c:
        # emptied to new files: deleted rows (a drain's events, every round's jobs) left
        # behind, even vacuumed, slowed every later round (a run's drain rounds fell from
        # 9,345 to ~3,000 jobs/s while job_queue grew to 68 MB for 3,000 rows)
        c.execute("TRUNCATE portalq.job_queue CASCADE")   # and the tables that refer to it
        c.execute("ANALYZE portalq.job_queue, job_events")


CPU: dict[tuple[str, str], list[float]] = {}   # client CPU microseconds per job
WAL: dict[tuple[str, str], list[float]] = {}   # WAL bytes per job (server, exact)


def _lsn(c: psycopg.Connection[Any]) -> str:
    return str(c.execute("SELECT pg_current_wal_lsn()").fetchone()[0])


def _wal_since(c: psycopg.Connection[Any], lsn: str) -> float:
    return float(c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
                           (lsn,)).fetchone()[0])


TYPES = ("bench_plain", "bench_sealed")


def _pairs(url: str, n: int, call: Any) -> dict[str, float]:
    """``n`` calls of each type, interleaved call by call (which type goes first alternates),
    so both see the same moment of the machine -- its disk's commit latency drifts over
    seconds by more than the difference measured. Each call's wall and CPU time is summed
    per type: jobs/s = jobs / summed wall time."""
    wall = dict.fromkeys(TYPES, 0.0)
    cpu = dict.fromkeys(TYPES, 0.0)
    jobs = dict.fromkeys(TYPES, 0)
    with _conn(url) as c:
        for i in range(n):
            for job_type in (TYPES if i % 2 == 0 else TYPES[::-1]):
                t0, c0 = time.perf_counter(), time.process_time()
                jobs[job_type] += call(c, job_type, i)
                cpu[job_type] += time.process_time() - c0
                wall[job_type] += time.perf_counter() - t0
    return {t: jobs[t] / wall[t] for t in TYPES} | {f"cpu {t}": cpu[t] / jobs[t] * 1e6
                                                     for t in TYPES}


def _single(c: psycopg.Connection[Any], job_type: str, i: int) -> int:
    enqueue(job_type, "bench", payload(i), conn=c)
    return 1


def _batch(c: psycopg.Connection[Any], job_type: str, i: int) -> int:
    enqueue_many([NewJob(job_type, "bench", payload(i * 500 + k)) for k in range(500)],
                 conn=c)
    return 500


def bench_single(url: str) -> dict[str, float]:
    """Single enqueues (one job per call, autocommit), interleaved job by job."""
    return _pairs(url, SINGLE, _single)


def bench_batch(url: str) -> dict[str, float]:
    """Batch enqueues (enqueue_many of 500: the COPY path), interleaved batch by batch;
    the WAL both types wrote together is not told apart, so it is measured apart: one
    batch of each after the round."""
    out = _pairs(url, BATCH_N // 500, _batch)
    with _conn(url) as c:
        for job_type in TYPES:
            lsn = _lsn(c)
            _batch(c, job_type, 10**6)
            WAL.setdefault(("batch", job_type), []).append(_wal_since(c, lsn) / 500)
    return out


async def _drain(url: str) -> float:
    from portalq.jobs.db.location import libpq_dsn
    from portalq.scheduler.config import Settings
    from portalq.scheduler.worker import Worker, make_pool

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
                "SELECT count(*) FROM portalq.job_queue WHERE status <> 'completed'")).fetchone()
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
    from portalq.scheduler.handlers import register_handler

    async def noop(ctx: Any) -> None:
        assert ctx.payload[PARTY]["ssn"]   # the opened payload, as a flow reads it

    register_handler("bench_plain", noop)
    register_handler("bench_sealed", noop)
    url = setup()
    results: dict[tuple[str, str], list[float]] = {}
    for r in range(ROUNDS):
        for name, fn in (("single", bench_single), ("batch", bench_batch)):
            if name in MODES:
                _clear(url)
                got = fn(url)
                for job_type in TYPES:
                    results.setdefault((name, job_type), []).append(got[job_type])
                    CPU.setdefault((name, job_type), []).append(got[f"cpu {job_type}"])
        if "drain" in MODES:   # a drain is one type's jobs: whole rounds, order alternating
            for job_type in (TYPES if r % 2 == 0 else TYPES[::-1]):
                _clear(url)
                results.setdefault(("drain", job_type), []).append(bench_drain(url, job_type))
    print(f"payload={KIND} rounds={ROUNDS} single={SINGLE} batch={BATCH_N} (enqueue_many of "
          f"500, COPY; both interleaved call by call) drain={DRAIN_N} (workers=50)")
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

"""The soak (scale_bench.py soak): enqueue and drain together for SOAK_MINUTES at SOAK_RATE.

* A producer thread enqueues SOAK_RATE jobs/s with ``enqueue_many`` (one write per 100 ms
  slot); each job carries its number, and the slot's commit time is kept.
* One worker process (bench_portalq's, workers=50) drains; its handler writes each job's
  start time (LAT_FILE): pickup latency = start - commit of the job's slot.
* A pruner thread, every SOAK_TICK_S (10), deletes jobs finished SOAK_RETENTION_S (180)
  ago with ``worker_api.prune_finished`` (batches of 10,000) until a batch comes back short
  (SOAK_PRUNE=loop), or one batch per tick as ``scheduler.tick`` does (SOAK_PRUNE=tick).
* A sampler, every 15 s: job_queue / job_events sizes (table, indexes), live and dead
  tuples, updates and HOT updates, autovacuum runs.

SOAK_SCHEMA=0011 measures the schema before the tuning migration, head (default) with it.
SOAK_WAITING (100000) jobs wait, not due, as in the depth figures.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from datetime import timedelta
from typing import Any

import scale_bench as sb
import scale_common as sc

MINUTES = float(os.environ.get("SOAK_MINUTES", "10"))
RETENTION_S = float(os.environ.get("SOAK_RETENTION_S", "180"))
TICK_S = float(os.environ.get("SOAK_TICK_S", "10"))
PRUNE = os.environ.get("SOAK_PRUNE", "loop")
SCHEMA = os.environ.get("SOAK_SCHEMA", "head")
WAITING = int(os.environ.get("SOAK_WAITING", "100000"))
SAMPLE_S = 15.0

_STATS = """
SELECT relname, pg_table_size(relid), pg_indexes_size(relid), n_live_tup, n_dead_tup,
       n_tup_upd, n_tup_hot_upd, autovacuum_count, autoanalyze_count
FROM pg_stat_user_tables WHERE relname IN ('job_queue', 'job_events') ORDER BY relname"""


def _rate() -> float:
    if os.environ.get("SOAK_RATE"):
        return float(os.environ["SOAK_RATE"])
    try:
        import json

        d = json.loads((sb.RESULTS / "depth.json").read_text())
        first = next(iter(d["rows"].values()))
        return 0.7 * statistics.median(first["portalq"]["drain_def"])
    except (OSError, KeyError, StopIteration, ValueError):
        return 1000.0


def _setup() -> None:
    from portalq.jobs.db.migrate import upgrade

    sc.common.recreate_db(sc.PQ.db)
    upgrade(sc.common.dsn(sc.PQ.db).replace("postgresql://", "postgresql+psycopg://", 1), SCHEMA)
    from portalq.scheduler.calendar_cache import store_holidays

    store_holidays(sc.common.dsn(sc.PQ.db).replace("postgresql://", "postgresql+psycopg://", 1))
    sc.sql(sc.PQ.db, "INSERT INTO portalq.portals (code, name, timezone, max_concurrent_sessions) "
                     "VALUES ('bench', 'bench', 'UTC', NULL)")
    sc.sql(sc.PQ.db, "INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                     "SELECT 'bench', d, '00:00', '00:00' FROM generate_series(0, 6) d")
    sc.fill_waiting_portalq(WAITING)
    sc.sql(sc.PQ.db, "CHECKPOINT")


def soak() -> None:
    import psycopg

    from portalq.jobs.queue import NewJob, enqueue_many

    sc.ensure_server()
    (sc.HOME / "logs").mkdir(parents=True, exist_ok=True)
    _setup()
    rate = _rate()
    per_slot = max(1, round(rate / 10))
    lat_file = sc.HOME / "logs" / "soak-lat.txt"
    lat_file.unlink(missing_ok=True)
    ws = sc.common.start_workers(sc.PQ, 1, "def", "latency",
                                 {**os.environ, "LAT_FILE": str(lat_file)}, str(sc.HOME / "logs"))
    stop = threading.Event()
    slots: list[tuple[int, int, float]] = []        # (first job number, count, commit time)
    samples: list[dict[str, Any]] = []
    prunes: list[tuple[float, int, float]] = []     # (t, pruned, ms)
    t_start = time.time()

    def produce() -> None:
        seq = 0
        with psycopg.connect(sc.common.dsn(sc.PQ.db), autocommit=True) as c:
            nxt = time.monotonic()
            while not stop.is_set():
                enqueue_many([NewJob("bench_noop", "soak", {"i": seq + k})
                              for k in range(per_slot)], conn=c)
                slots.append((seq, per_slot, time.time()))
                seq += per_slot
                nxt += 0.1
                time.sleep(max(0.0, nxt - time.monotonic()))

    def prune() -> None:
        from psycopg import AsyncConnection

        from portalq.jobs import worker_api

        async def run() -> None:
            async with await AsyncConnection.connect(sc.common.dsn(sc.PQ.db),
                                                     autocommit=True) as c:
                while not stop.is_set():
                    t = time.perf_counter()
                    total = 0
                    while True:
                        k = await worker_api.prune_finished(
                            c, older_than=timedelta(seconds=RETENTION_S))
                        total += k
                        if k < 10_000 or PRUNE == "tick":
                            break
                    prunes.append((time.time() - t_start, total, (time.perf_counter() - t) * 1e3))
                    await asyncio.sleep(max(0.0, TICK_S - (time.perf_counter() - t)))

        asyncio.run(run())

    def sample() -> None:
        while not stop.wait(SAMPLE_S if samples else 0.0):
            rows = sc.sql(sc.PQ.db, _STATS)
            samples.append({"t": time.time() - t_start,
                            "tables": {r[0]: list(r[1:]) for r in rows}})

    threads = [threading.Thread(target=f) for f in (produce, prune, sample)]
    try:
        ws[0].go()
        for th in threads:
            th.start()
        stop.wait(MINUTES * 60)
    finally:
        stop.set()
        for th in threads:
            th.join()
        time.sleep(2.0)              # the last slot's jobs finish (the worker keeps going)
        for w in ws:
            w.stop()
    samples.append({"t": time.time() - t_start,
                    "tables": {r[0]: list(r[1:]) for r in sc.sql(sc.PQ.db, _STATS)}})
    minutes = _per_minute(slots, lat_file, t_start)
    res = {"rate": rate, "minutes": MINUTES, "retention_s": RETENTION_S, "tick_s": TICK_S,
           "prune": PRUNE, "schema": SCHEMA, "waiting": WAITING, "per_minute": minutes,
           "samples": samples, "prunes": prunes, "load_after": sc.load_average()}
    label = os.environ.get("SOAK_LABEL", SCHEMA)
    sb.save(f"soak-{label}", res)
    _print(res)


def _per_minute(slots: list[tuple[int, int, float]], lat_file: Any,
                t0: float) -> list[dict[str, Any]]:
    commit: dict[int, float] = {}
    for first, n, t in slots:
        for k in range(first, first + n):
            commit[k] = t
    buckets: dict[int, list[float]] = {}
    for line in lat_file.read_text().splitlines():
        p = line.split()
        if len(p) != 2 or int(p[0]) not in commit:
            continue
        i, start = int(p[0]), float(p[1])
        buckets.setdefault(int((start - t0) // 60), []).append((start - commit[i]) * 1e3)
    out = []
    for m in sorted(buckets):
        xs = buckets[m]
        out.append({"minute": m + 1, "jobs_s": len(xs) / 60.0, "p50_ms": sc.common.pct(xs, 50),
                    "p99_ms": sc.common.pct(xs, 99)})
    out.append({"enqueued": len(commit), "started": sum(len(v) for v in buckets.values())})
    return out


def _print(res: dict[str, Any]) -> None:
    print(f"\nsoak {res['minutes']} min at {res['rate']:,.0f} jobs/s, schema {res['schema']}, "
          f"prune {res['prune']} every {res['tick_s']:.0f} s, retention {res['retention_s']:.0f} s"
          f", {res['waiting']:,} waiting")
    for m in res["per_minute"][:-1]:
        print(f"  minute {m['minute']:3d}: {m['jobs_s']:8,.0f} jobs/s  pickup p50 "
              f"{m['p50_ms']:7.1f}  p99 {m['p99_ms']:8.1f} ms")
    print(f"  {res['per_minute'][-1]}")
    for s in res["samples"][:: max(1, len(res["samples"]) // 12)] + res["samples"][-1:]:
        q, e = s["tables"]["job_queue"], s["tables"]["job_events"]
        print(f"  t={s['t']:6.0f}s job_queue {q[0] / 2**20:7.1f}+{q[1] / 2**20:6.1f} MiB live "
              f"{q[2]:>9,} dead {q[3]:>8,} hot {q[5]:>8,}/{q[4]:>9,} av {q[6]:3d} | job_events "
              f"{e[0] / 2**20:7.1f}+{e[1] / 2**20:6.1f} MiB dead {e[3]:>8,} av {e[6]:3d}")


PARTS = {"soak": soak}

"""The scale benchmarks' other parts: bulk enqueue and deferral, and ten million jobs of
history with the prune (see scale_bench.py; the soak is scale_soak.py, the commit-rate
limit scale_limit.py)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import scale_bench as sb
import scale_common as sc

BULK_N = int(os.environ.get("BULK_N", "1000000"))
HISTORY_DAYS = 33.0          # 10 % of the history past a 30-day retention: the prune's work


def _url(db: str) -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:{sc.PORT}/{db}"


# ------------------------------------------------------------------ bulk

def _bulk_file(n: int) -> str:
    path = sc.HOME / f"batch-{n}.jsonl"
    if not path.exists():
        payload = {"names": ["Acme Widgets Ltd."],
                   "applicant": {"name": "A. Person", "email": "a@example.test",
                                 "phone": "+1 604 555 0100"}}
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps({"job_type": "name_search", "order": f"ORD-{i}",
                                    "payload": payload}) + "\n")
    return str(path)


def _defer_1m(n: int) -> dict[str, Any]:
    """n due jobs of a portal that has just closed, deferred as the tick does (batches)."""
    from psycopg import AsyncConnection

    from portalq.jobs import clock, worker_api

    sc.sql(sc.PQ.db, "INSERT INTO portalq.portals (code, name, timezone, max_concurrent_sessions) "
                     "VALUES ('closing', 'closing', 'UTC', NULL) ON CONFLICT DO NOTHING")
    sc.sql(sc.PQ.db, """
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                               created_at, updated_at)
        SELECT 'bench_noop', 'due-' || g, 'closing', '{}'::jsonb, 'pending',
               now() - interval '1 hour', now(), now()
        FROM generate_series(1, %s) g""", (n,))
    sc.sql(sc.PQ.db, "VACUUM ANALYZE portalq.job_queue")
    sc.sql(sc.PQ.db, "CHECKPOINT")

    async def run() -> tuple[int, float]:
        async with await AsyncConnection.connect(sc.common.dsn(sc.PQ.db), autocommit=True) as c:
            t0 = time.perf_counter()
            k = await worker_api.defer_portal(c, portal="closing",
                                              next_open=clock.now() + timedelta(days=3),
                                              reason="closed")
            return k, time.perf_counter() - t0

    out: dict[str, Any] = {}

    def during() -> dict[str, Any]:
        k, dt = asyncio.run(run())
        out.update(deferred=k, secs=dt)
        return {}

    lat = sc.latency(sc.PQ, during=during)       # claims of the open portal meanwhile
    sc.sql(sc.PQ.db, "DELETE FROM portalq.job_queue WHERE portal = 'closing'")
    sc.sql(sc.PQ.db, "TRUNCATE portalq.job_events")
    sc.sql(sc.PQ.db, "VACUUM ANALYZE portalq.job_queue")
    return {**out, "claim_p50_ms": lat["p50_ms"], "claim_p99_ms": lat["p99_ms"],
            "claim_max_ms": lat["max_ms"]}


def bulk() -> None:
    sc.ensure_server()
    sc.setup_both()
    path = _bulk_file(BULK_N)
    env = {**os.environ, "PORTALQ_DATABASE_URL": _url(sc.PQ.db)}
    t0 = time.perf_counter()
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "portalq"),
                        "enqueue-batch", path], env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"scale_bench: error: enqueue-batch failed: {r.stderr.strip()[:300]}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    got = sc.one(sc.PQ.db, "SELECT count(*) FROM portalq.job_queue")
    assert got == BULK_N, f"{got} jobs, not {BULK_N}"
    sc.reset(sc.PQ, 0)
    t1 = time.perf_counter()
    asyncio.run(sc.PGQ.enqueue_batch(BULK_N, 1000))
    pgq_dt = time.perf_counter() - t1
    sc.reset(sc.PGQ, 0)
    t2 = time.perf_counter()
    asyncio.run(sc.PQ.enqueue_batch(BULK_N, 1000))
    api_dt = time.perf_counter() - t2
    sc.reset(sc.PQ, 0)
    d = _defer_1m(BULK_N)
    res = {"enqueue_batch_cli_s": dt, "cli_peak_rss_mib": rss, "api_batches_s": api_dt,
           "pgqueuer_batches_s": pgq_dt, "defer": d, "load": sc.load_average()}
    sb.save("bulk", res)
    print(f"\nportalq enqueue-batch, {BULK_N:,} lines: {dt:.1f} s ({BULK_N / dt:,.0f} jobs/s, "
          f"peak RSS {rss:,.0f} MiB)\n  enqueue_many API, batches of 1,000: {api_dt:.1f} s "
          f"({BULK_N / api_dt:,.0f} jobs/s); PGQueuer batches of 1,000: {pgq_dt:.1f} s "
          f"({BULK_N / pgq_dt:,.0f} jobs/s)\n"
          f"bulk deferral of {d['deferred']:,} due jobs: {d['secs']:.1f} s "
          f"({d['deferred'] / d['secs']:,.0f} jobs/s); claims of an open portal meanwhile: "
          f"p50 {d['claim_p50_ms']:.1f} p99 {d['claim_p99_ms']:.1f} max {d['claim_max_ms']:.1f} ms")


# ------------------------------------------------------------------ history

def _prune_all(cut_days: float) -> dict[str, Any]:
    """prune_finished as the tick calls it (batches of 10,000), until nothing is left."""
    from psycopg import AsyncConnection

    from portalq.jobs import worker_api

    async def run() -> dict[str, Any]:
        async with await AsyncConnection.connect(sc.common.dsn(sc.PQ.db), autocommit=True) as c:
            batches: list[float] = []
            total = 0
            t0 = time.perf_counter()
            while True:
                t = time.perf_counter()
                k = await worker_api.prune_finished(c, older_than=timedelta(days=cut_days))
                batches.append((time.perf_counter() - t) * 1000.0)
                total += k
                if k < 10_000:
                    break
            return {"pruned": total, "prune_s": time.perf_counter() - t0,
                    "batch_ms_p50": statistics.median(batches), "batch_ms_max": max(batches)}

    return asyncio.run(run())


def history() -> None:
    sc.ensure_server()
    sc.setup_both()
    rows: dict[str, Any] = {}
    rows["load_before"] = sc.load_average()
    sb._measure("empty", rows.setdefault("rows", {}))
    t0 = time.perf_counter()
    sc.fill_history_portalq(sb.HISTORY_N, days=HISTORY_DAYS)
    rows["fill_s"] = time.perf_counter() - t0
    rows["sizes"] = sc.sql(sc.PQ.db, """
        SELECT relname, pg_table_size(relid), pg_indexes_size(relid) FROM pg_stat_user_tables
        WHERE relname IN ('job_queue', 'job_events')""")
    # PGQueuer keeps no finished jobs in its queue table (they move to pgqueuer_log): the
    # same number of log rows is its history
    sc.sql(sc.PGQ.db, """
        INSERT INTO pgqueuer_log (created, job_id, status, priority, entrypoint)
        SELECT now() - g * interval '1 second', g, 'successful', 0, 'noop'
        FROM generate_series(1, %s) g""", (sb.HISTORY_N,))
    sc.sql(sc.PGQ.db, "VACUUM ANALYZE pgqueuer_log")
    label = f"{sb.HISTORY_N:,} history"
    sb._measure(label, rows["rows"])
    before = sc.latency(sc.PQ)
    prune: dict[str, Any] = {}
    lat = sc.latency(sc.PQ, during=lambda: prune.update(_prune_all(30.0)) or {})
    rows["prune"] = {**prune, "claim_before_p50": before["p50_ms"],
                     "claim_before_p99": before["p99_ms"], "claim_during_p50": lat["p50_ms"],
                     "claim_during_p99": lat["p99_ms"], "claim_during_max": lat["max_ms"]}
    rows["load_after"] = sc.load_average()
    sb.save("history", rows)
    sb.report(rows["rows"], "empty")
    p = rows["prune"]
    print(f"fill: {rows['fill_s']:.0f} s; sizes {rows['sizes']}")
    print(f"prune of {p['pruned']:,} jobs (+ events) past retention: {p['prune_s']:.1f} s "
          f"({p['pruned'] / p['prune_s']:,.0f} jobs/s), a batch of 10,000 p50 "
          f"{p['batch_ms_p50']:.0f} ms max {p['batch_ms_max']:.0f} ms; pickup before p50/p99 "
          f"{p['claim_before_p50']:.1f}/{p['claim_before_p99']:.1f} ms, during "
          f"{p['claim_during_p50']:.1f}/{p['claim_during_p99']:.1f} (max "
          f"{p['claim_during_max']:.1f}) ms")


PARTS = {"bulk": bulk, "history": history}

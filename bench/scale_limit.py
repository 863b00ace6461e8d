"""The limit (issue 19): this machine's commit rate for a one-row INSERT, and each queue's
single enqueue as a fraction of it, measured in short blocks taken in turn.

    python bench/scale_bench.py limit       # LIMIT_ROUNDS (20) rounds of LIMIT_N (1,000) calls

The disk's flush time drifts by 1.5-2x within minutes here, so one 10 s pgbench run paired
with an enqueue run after it gave ratios from 0.46 to 0.85 for the same code (earlier
passes). Here every side runs LIMIT_N transactions, one after the other, the order rotated
each round, and each side's ratio is taken against pgbench *of the same round*; printed are
the medians of those per-round ratios with their quartiles. The sides:

- ``pgbench``: ``pgbench -n -c 1 -t N`` of ``INSERT INTO pgb_insert (v) VALUES (1)`` (a
  bigserial key), autocommit: the ceiling the issue names;
- ``pgbench, no flush``: the same with ``synchronous_commit=off``, so 1/rate(pgbench) -
  1/rate(no flush) is what a commit's flush costs on this disk;
- ``psycopg bare``: the same INSERT from psycopg (prepared, autocommit): a Python client;
- ``asyncpg bare``: the same from asyncpg, PGQueuer's driver;
- ``job INSERT``: portalq's own statement (``enqueue_one_known``, fixed values) from
  psycopg, no queue code around it: the job row;
- ``portalq`` and ``pgqueuer``: the adapters' ``enqueue_single`` (one job a transaction,
  as ``make bench``).

So portalq / pgbench splits into psycopg bare / pgbench (a Python client against a C one),
job INSERT / psycopg bare (the job's row against a two-column one) and portalq / job INSERT
(portalq's Python around the statement).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import scale_bench as sb
import scale_common as sc

ROUNDS = int(os.environ.get("LIMIT_ROUNDS", "20"))
N = int(os.environ.get("LIMIT_N", "1000"))
INSERT = "INSERT INTO pgb_insert (v) VALUES (1)"


def _pgbench(db: str, n: int, flush: bool = True) -> float:
    script = sc.HOME / "insert.sql"
    script.write_text(INSERT + ";\n")
    env = dict(os.environ)
    if not flush:
        env["PGOPTIONS"] = "-c synchronous_commit=off"
    out = subprocess.run([str(sc.PGBIN / "pgbench"), "-h", "127.0.0.1", "-p", sc.PORT,
                          "-U", "postgres", "-n", "-c", "1", "-t", str(n), "-f", str(script),
                          db], check=True, capture_output=True, text=True, env=env).stdout
    tps = [ln for ln in out.splitlines() if ln.startswith("tps")]
    return float(tps[0].split("=")[1].split()[0])


def _timed(n: int, run: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        run()
    return n / (time.perf_counter() - t0)


def _psycopg_bare(db: str, n: int) -> float:
    with psycopg.connect(sc.common.dsn(db), autocommit=True) as c:
        return _timed(n, lambda: c.execute(INSERT, prepare=True))


def _job_insert(db: str, n: int) -> float:
    """portalq's single-job INSERT as jobs.enqueue sends it for a known portal, values
    fixed, psycopg's prepared statement: the row without the queue's Python."""
    import bench_portalq

    from portalq.jobs.db import sql

    now = datetime.now(UTC)
    params = {"id": None, "job_type": bench_portalq.JOB_TYPE, "order_id": bench_portalq.ORDER,
              "portal": bench_portalq.PORTAL, "payload": "{}", "priority": 0, "run_at": now,
              "max_attempts": 5, "idempotency_key": None, "rate_key": None, "now": now,
              "secret_key_id": None, "secret_dek": None, "secret_data": None}
    statement = sql.query("enqueue_one_known")
    with psycopg.connect(sc.common.dsn(db), autocommit=True) as c:
        return _timed(n, lambda: c.execute(statement, params, prepare=True))


async def _asyncpg_bare(db: str, n: int) -> float:
    import asyncpg

    conn = await asyncpg.connect(sc.common.dsn(db))
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            await conn.execute(INSERT)
        return n / (time.perf_counter() - t0)
    finally:
        await conn.close()


def _quartiles(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4)
    return f"{statistics.median(xs):.2f} ({q[0]:.2f}-{q[2]:.2f})"


def limit() -> None:
    if ROUNDS < 2:   # quartiles need two rounds
        raise SystemExit(f"scale_limit: error: LIMIT_ROUNDS must be 2 or more, got {ROUNDS}")
    sc.ensure_server()
    sc.setup_both()
    db = sc.PQ.db
    sc.sql(db, "DROP TABLE IF EXISTS pgb_insert")
    sc.sql(db, "CREATE TABLE pgb_insert (id bigserial PRIMARY KEY, v int)")
    sides: dict[str, Callable[[], float]] = {
        "pgbench": lambda: _pgbench(db, N),
        "pgbench, no flush": lambda: _pgbench(db, N, flush=False),
        "psycopg bare": lambda: _psycopg_bare(db, N),
        "asyncpg bare": lambda: asyncio.run(_asyncpg_bare(db, N)),
        "job INSERT": lambda: _job_insert(db, N),
        "portalq": lambda: N / asyncio.run(sc.PQ.enqueue_single(N)),
        "pgqueuer": lambda: N / asyncio.run(sc.PGQ.enqueue_single(N)),
    }
    names = list(sides)
    rates: dict[str, list[float]] = {k: [] for k in names}
    for r in range(ROUNDS):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            rates[name].append(sides[name]())
        print(f"  limit round {r + 1}: " + ", ".join(
            f"{name} {rates[name][-1]:,.0f}" for name in names)
            + f" /s (load {sc.load_average()})", flush=True)
        if r % 5 == 4:   # keep the tables small: the rounds' rows only
            sc.sql(db, "TRUNCATE pgb_insert")
            sc.reset(sc.PQ, 0)
            sc.reset(sc.PGQ, 0)
    sc.sql(db, "DROP TABLE pgb_insert")
    sc.reset(sc.PQ, 0)
    sc.reset(sc.PGQ, 0)

    def per_round(a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(rates[a], rates[b], strict=True)]

    ratios = {name: per_round(name, "pgbench") for name in names}
    flush_us = [1e6 / p - 1e6 / f for p, f in
                zip(rates["pgbench"], rates["pgbench, no flush"], strict=True)]
    parts = {"psycopg bare / pgbench": per_round("psycopg bare", "pgbench"),
             "job INSERT / psycopg bare": per_round("job INSERT", "psycopg bare"),
             "portalq / job INSERT": per_round("portalq", "job INSERT"),
             "pgqueuer / asyncpg bare": per_round("pgqueuer", "asyncpg bare")}
    sb.save("limit", {"rounds": ROUNDS, "n": N, "rates": rates, "flush_us": flush_us})
    print(f"\nthe limit, {ROUNDS} rounds of {N:,} transactions a side, in turn; "
          "rate median (quartiles), ratio to pgbench of the same round:")
    for name in names:
        q = statistics.quantiles(rates[name], n=4)
        print(f"  {name:18s} {statistics.median(rates[name]):8,.0f} ({q[0]:,.0f}-{q[2]:,.0f})/s"
              f"   {_quartiles(ratios[name])}")
    print(f"  a commit's flush: {statistics.median(flush_us):,.0f} us (median of the rounds)")
    for label, xs in parts.items():
        print(f"  {label:26s} {_quartiles(xs)}")


PARTS = {"limit": limit}

"""What the worker's own Python costs per job and per statement (issue 19, fourth pass).

    python bench/worker_cost.py execute      # Worker._execute around a no-op, no database
    PQB_HOME=/tmp/pq-bench python bench/worker_cost.py statements   # the bench's server

``execute``: min over ROUNDS (15) rounds of 10,000 no-op jobs run as the claim loop runs
them (ten tasks at a time), slots freed by hand: the per-job cost of the context, the
guard, the timeout, the metrics and the evidence check, without the database.
``statements``: client CPU (``time.process_time``) per call, median of 400: the pool's
checkout alone, ``SELECT 1`` through the pool, and a claim that finds nothing (portals
without jobs), so the claim's own Python shows without row decoding.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _job(i: int, job_type: str, now: datetime) -> dict[str, Any]:
    return {"id": i, "job_type": job_type, "order_id": "bench", "portal": "bench",
            "payload": {}, "priority": 0, "run_at": now, "attempts": 1, "max_attempts": 5,
            "checkpoint": {}, "created_at": now, "rate_key": None, "crashes": 0,
            "probe_failures": 0, "secret_key_id": None, "secret_dek": None,
            "secret_data": None, "from_status": "pending"}


async def execute(rounds: int) -> None:
    import bench_portalq as bp

    from portalq.scheduler.handlers import register_handler
    from portalq.scheduler.worker import Worker

    async def noop(ctx: Any) -> None:
        return None

    register_handler(bp.JOB_TYPE, noop)
    w = Worker(bp._settings("10"), None, "")  # type: ignore[arg-type]  # never used here
    now, best = datetime.now(UTC), float("inf")
    for r in range(rounds):
        jobs = [_job(i, bp.JOB_TYPE, now) for i in range(r * 10_000, (r + 1) * 10_000)]
        t0 = time.perf_counter()
        for k in range(0, len(jobs), 10):
            batch = jobs[k:k + 10]
            tasks = []
            for j in batch:
                w.running[j["id"]] = t = asyncio.create_task(w._execute(j))  # type: ignore[arg-type]
                tasks.append(t)
            await asyncio.gather(*tasks)
            for j in batch:
                w._free(j["id"])
            w._done.clear()
            w._unflushed = 0
        best = min(best, (time.perf_counter() - t0) / len(jobs))
    print(f"Worker._execute around a no-op: {best * 1e6:.1f} µs a job (min of {rounds})")


async def statements(n: int = 400) -> None:
    import bench_portalq as bp
    import scale_common as sc

    from portalq.jobs import worker_api
    from portalq.jobs.db.location import database_url, libpq_dsn
    from portalq.scheduler.worker import Worker, make_pool

    sc.ensure_server()
    settings = bp._settings("10")
    dsn = libpq_dsn(database_url(settings.database_url))
    pool = make_pool(settings, dsn)
    await pool.open(wait=True)
    w = Worker(settings, pool, dsn)
    await w.refresh_portals()
    idle = [c for c in w.capacities() if c.portal != bp.PORTAL]   # portals without jobs

    async def checkout() -> None:
        async with pool.connection():
            pass

    async def select1() -> None:
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")

    async def empty_claim() -> None:
        async with pool.connection() as conn:
            await worker_api.claim(conn, worker=w.node, capacities=idle, limit=10)

    for label, fn in (("pool checkout", checkout), ("SELECT 1 through the pool", select1),
                      ("a claim that finds nothing", empty_claim)):
        cpu = []
        for _ in range(n):
            t = time.process_time()
            await fn()
            cpu.append(time.process_time() - t)
        print(f"{label:28s} client CPU median {statistics.median(cpu) * 1e6:6.0f} µs")
    await pool.close()


def main() -> None:
    sys.path[:0] = [str(HERE)]
    os.environ.setdefault("PORTALQ_HOME", tempfile.mkdtemp(prefix="pq-worker-cost-"))
    import scale_common  # noqa: F401  (the peer harness on the path, the server's settings)

    part = sys.argv[1] if len(sys.argv) > 1 else "execute"
    if part == "execute":
        asyncio.run(execute(int(os.environ.get("ROUNDS", "15"))))
    elif part == "statements":
        asyncio.run(statements())
    else:
        raise SystemExit(f"unknown part {part!r} (execute, statements)")


if __name__ == "__main__":
    main()

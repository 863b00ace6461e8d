"""The console search indexer's delay under the peer bench's enqueue load (issue 49.1).

    python bench/search_lag.py        # against the server on $PGPORT (make bench's, 55434)

A database of its own (``lag_portalq``, migrated). The indexer runs as the service runs it
(``scheduler.search_indexer.loop`` on an async pool, this process the leader). Another
process enqueues, as ``make bench`` does, ``LAG_N`` jobs one per transaction and then
``LAG_N`` in batches of ``BATCH`` (``enqueue_many``: the COPY), each job with a
``legal_name`` (every job indexed: the indexer's worst case), and notes each commit's last
id and time. This process reads the mark every 5 ms. A job's delay: from its commit to the
first read of a mark at or past its id. p50 / p99 / max per phase.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import common  # noqa: E402
import psycopg  # noqa: E402

DB = "lag_portalq"
N = int(os.environ.get("LAG_N", "20000"))
BATCH = int(os.environ.get("BATCH", "1000"))
PAYLOAD = {"legal_name": "Lag Test Holdings LLC"}


def _enqueue(out: Any) -> None:
    from pydantic import BaseModel

    from portalq.jobs import types
    from portalq.jobs.queue import NewJob, enqueue, enqueue_many

    class Named(BaseModel):
        legal_name: str

    types.register(types.JobType("bench_named", Named, "delaware_icis"))

    with psycopg.connect(common.dsn(DB), autocommit=True) as c:
        for i in range(N):
            job = enqueue("bench_named", f"S-{i}", PAYLOAD, conn=c)
            out.put(("single", job.id, time.time()))
        for done in range(0, N, BATCH):
            jobs = enqueue_many([NewJob("bench_named", f"B-{done + k}", PAYLOAD)
                                 for k in range(min(BATCH, N - done))], conn=c)
            out.put(("batch", max(j.id for j in jobs), time.time()))
    out.put(None)


async def _measure() -> dict[str, list[float]]:
    from psycopg_pool import AsyncConnectionPool

    from portalq.jobs import search_index
    from portalq.scheduler import search_indexer

    marks: list[tuple[float, int]] = []
    async with AsyncConnectionPool(common.dsn(DB), min_size=2, max_size=4,
                                   kwargs={"autocommit": True}) as pool:
        indexer = asyncio.create_task(search_indexer.loop(pool, lambda: True))
        out: Any = mp.get_context("spawn").Queue()
        writer = mp.get_context("spawn").Process(target=_enqueue, args=(out,))
        writer.start()
        commits: list[tuple[str, int, float]] = []
        async with pool.connection() as conn:
            while True:
                while not out.empty():
                    item = out.get()
                    if item is None:
                        break
                    commits.append(item)
                else:
                    if not writer.is_alive() and out.empty():
                        raise SystemExit(f"the enqueuing process stopped: {writer.exitcode}")
                    marks.append((time.time(), (await search_index.amark(conn)).indexed_to))
                    await asyncio.sleep(0.005)
                    continue
                break
            last = max(i for _, i, _ in commits)
            while marks[-1][1] < last:
                marks.append((time.time(), (await search_index.amark(conn)).indexed_to))
                await asyncio.sleep(0.005)
        indexer.cancel()
        writer.join()
    delays: dict[str, list[float]] = {"single": [], "batch": []}
    at = 0
    for phase, job_id, committed in commits:   # both rise: one pass over the reads
        while marks[at][0] < committed or marks[at][1] < job_id:
            at += 1
        delays[phase].append((marks[at][0] - committed) * 1000)
    return delays


def main() -> None:
    from portalq.jobs.db.migrate import upgrade

    common.admin(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    common.admin(f"CREATE DATABASE {DB}")
    upgrade(common.dsn(DB))
    started = time.monotonic()
    delays = asyncio.run(_measure())
    load = os.getloadavg()
    print(f"search indexer delay, ms (N={N} per phase, load average {load[0]:.1f}, "
          f"{time.monotonic() - started:.0f} s):")
    for phase, ms in delays.items():
        print(f"  {phase:6s} p50 {common.percentile(ms, 50):7.1f}  p99 "
              f"{common.percentile(ms, 99):7.1f}  max {max(ms):7.1f}  ({len(ms)} commits)")


if __name__ == "__main__":
    main()

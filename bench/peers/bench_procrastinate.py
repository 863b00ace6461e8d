"""Procrastinate's driver for the peer benchmark (``common.py`` has the method and the knobs).

Its public API only: an ``App`` on a ``PsycopgConnector``, a task, ``defer_async`` (one job,
one transaction), ``batch_defer_async`` (a batch), ``run_worker_async``, the schema by
``schema_manager.apply_schema_async``. Its defaults otherwise: the connector's pool,
``concurrency=1``, LISTEN/NOTIFY on, finished jobs kept. "10" is ``concurrency=10`` with a
pool of 11 connections (its docs: concurrency + 1 for short jobs).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import procrastinate  # noqa: E402
import psycopg  # noqa: E402

# the driver runs this file as __main__, which Procrastinate warns about: the workers
# import it as a module, the driver only defers
logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)

DB = os.environ.get("PROC_DB", "peers_procrastinate")
app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=common.dsn(DB)))
_recorder: common.LatencyRecorder | None = None


@app.task(name="noop")
async def noop(i: int | None = None) -> None:
    if _recorder is not None and i is not None:
        _recorder(i)


def setup() -> None:
    async def apply() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
    asyncio.run(apply())


async def enqueue_single(n: int) -> float:
    async with app.open_async():
        start = time.perf_counter()
        for _ in range(n):
            await noop.defer_async()
        return time.perf_counter() - start


async def enqueue_batch(n: int, batch: int) -> float:
    async with app.open_async():
        start = time.perf_counter()
        for done in range(0, n, batch):
            await noop.batch_defer_async(*([{}] * min(batch, n - done)))
        return time.perf_counter() - start


async def latency_enqueue(ids: list[int], gap: float) -> dict[int, float]:
    committed: dict[int, float] = {}
    async with app.open_async():
        for i in ids:
            await noop.defer_async(i=i)
            committed[i] = time.time()
            await asyncio.sleep(gap)
    return committed


def worker_main(conc: str, mode: str) -> None:
    global _recorder
    if mode == "latency":
        _recorder = common.LatencyRecorder()
    options: dict[str, Any] = {}
    if conc == "def":
        connector = procrastinate.PsycopgConnector(conninfo=common.dsn(DB))
    else:
        connector = procrastinate.PsycopgConnector(conninfo=common.dsn(DB),
                                                   max_size=int(conc) + 1)
        options["concurrency"] = int(conc)
    common.worker_handshake()

    async def work() -> None:
        with app.replace_connector(connector):
            async with app.open_async():
                await app.run_worker_async(**options)   # stops gracefully on SIGTERM

    asyncio.run(work())


def worker_cmd(conc: str, mode: str) -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    # imported as a module (not __main__): its task is found by name
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); "
            "import bench_procrastinate as m; m.worker_main(sys.argv[1], sys.argv[2])",
            conc, mode]


_UNFINISHED = "status IN ('todo', 'doing')"
ADAPTER = common.Adapter(
    name="procrastinate", version=procrastinate.__version__, db=DB, setup=setup,
    reset_sql="TRUNCATE procrastinate_jobs, procrastinate_events, procrastinate_workers, "
              "procrastinate_periodic_defers CASCADE",
    pending_sql=f"SELECT count(*) FROM procrastinate_jobs WHERE {_UNFINISHED}",
    exists_sql=f"SELECT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE {_UNFINISHED})",
    enqueue_single=enqueue_single, enqueue_batch=enqueue_batch,
    latency_enqueue=latency_enqueue, worker_cmd=worker_cmd,
    settings={"driver": f"psycopg {psycopg.__version__} + psycopg_pool (PsycopgConnector)",
              "conc=def": "concurrency=1, the pool's defaults",
              "conc=10": "concurrency=10, pool max_size=11", "listen_notify": True,
              "delete_jobs": "never (default)", "loop": "asyncio"})

if __name__ == "__main__":
    common.main(ADAPTER, worker_main)

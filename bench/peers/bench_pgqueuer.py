"""PGQueuer's driver for the peer benchmark (``common.py`` has the method and the knobs).

Its public API only: ``Queries.enqueue`` (one entrypoint: one job, one transaction; lists:
one batch), a worker as ``pgq run`` builds one (``PgQueuer.from_asyncpg_connection``, an
``entrypoint``, ``pgqueuer.run``), the schema by its CLI (``pgq install``, then
``pgq autovac`` as its performance guide asks). Its defaults otherwise: asyncpg, one
connection per worker and per producer, durable tables, ``batch_size=10`` and unlimited
concurrent tasks; "10" is ``max_concurrent_tasks=10`` with ``batch_size=5`` (it refuses a
limit below twice the batch). The stdlib event loop (``PGQ_LOOP=uvloop``: uvloop, as
``pgq run`` uses it when installed).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import asyncpg  # noqa: E402
import common  # noqa: E402
import pgqueuer  # noqa: E402
from pgqueuer import PgQueuer  # noqa: E402
from pgqueuer.db import AsyncpgDriver  # noqa: E402
from pgqueuer.models import Job  # noqa: E402
from pgqueuer.queries import Queries  # noqa: E402

DB = os.environ.get("PGQ_DB", "peers_pgqueuer")
LOOP = os.environ.get("PGQ_LOOP", "asyncio")
NAME = "noop"


def setup() -> None:
    env = {**os.environ, "PGHOST": common.PGHOST, "PGPORT": str(common.PGPORT),
           "PGUSER": common.PGUSER, "PGDATABASE": DB}
    pgq = os.path.join(os.path.dirname(sys.executable), "pgq")
    for step in ("install", "autovac"):
        subprocess.run([pgq, step], env=env, check=True)


@asynccontextmanager
async def _queries() -> AsyncIterator[Queries]:
    conn = await asyncpg.connect(common.dsn(DB))
    try:
        yield Queries(AsyncpgDriver(conn))
    finally:
        await conn.close()


async def enqueue_single(n: int) -> float:
    async with _queries() as q:
        start = time.perf_counter()
        for _ in range(n):
            await q.enqueue(NAME, None)
        return time.perf_counter() - start


async def enqueue_batch(n: int, batch: int) -> float:
    async with _queries() as q:
        start = time.perf_counter()
        for done in range(0, n, batch):
            k = min(batch, n - done)
            await q.enqueue([NAME] * k, [None] * k, [0] * k)
        return time.perf_counter() - start


async def latency_enqueue(ids: list[int], gap: float) -> dict[int, float]:
    committed: dict[int, float] = {}
    async with _queries() as q:
        for i in ids:
            await q.enqueue(NAME, str(i).encode())
            committed[i] = time.time()
            await asyncio.sleep(gap)
    return committed


_recorder: common.LatencyRecorder | None = None


@asynccontextmanager
async def _app() -> AsyncIterator[PgQueuer]:
    conn = await asyncpg.connect(common.dsn(DB))
    try:
        app = PgQueuer.from_asyncpg_connection(conn)

        @app.entrypoint(NAME)
        async def noop(job: Job) -> None:
            if _recorder is not None and job.payload is not None:
                _recorder(int(job.payload))

        yield app
    finally:
        await conn.close()


def worker_main(conc: str, mode: str) -> None:
    global _recorder
    if mode == "latency":
        _recorder = common.LatencyRecorder()
    options: dict[str, Any] = ({} if conc == "def" else
                               {"batch_size": max(1, int(conc) // 2),
                                "max_concurrent_tasks": int(conc)})
    common.worker_handshake()
    main = pgqueuer.run(_app, **options)   # stops gracefully on SIGTERM
    if LOOP == "uvloop":
        import uvloop

        uvloop.run(main)
    else:
        asyncio.run(main)


def worker_cmd(conc: str, mode: str) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), "worker", conc, mode]


ADAPTER = common.Adapter(
    name="pgqueuer", version=pgqueuer.__version__, db=DB, setup=setup,
    reset_sql="TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics",
    pending_sql="SELECT count(*) FROM pgqueuer WHERE status IN ('queued', 'picked')",
    exists_sql="SELECT EXISTS (SELECT 1 FROM pgqueuer WHERE status IN ('queued', 'picked'))",
    enqueue_single=enqueue_single, enqueue_batch=enqueue_batch,
    latency_enqueue=latency_enqueue, worker_cmd=worker_cmd,
    settings={"driver": f"asyncpg {asyncpg.__version__}, one connection per process",
              "durability": "durable (default)", "pgq autovac": "applied",
              "conc=def": "batch_size=10, max_concurrent_tasks unlimited",
              "conc=10": "max_concurrent_tasks=10, batch_size=5", "loop": LOOP})

if __name__ == "__main__":
    common.main(ADAPTER, worker_main)

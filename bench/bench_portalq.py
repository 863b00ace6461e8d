"""portalq's driver for the peer benchmark (bench/peers: the method in common.py there).

Usage (from the repository's root; one command measures portalq and both peers in the same
run): ``make bench`` (``bench/peers/run.py``), or directly, against a server on $PGPORT:
``python bench/bench_portalq.py setup|meta|run``.

Same method as bench/peers/bench_pgqueuer.py and bench_procrastinate.py: no-op jobs, worker
processes released after their imports (READY/GO handshake), queue-empty polling, pickup
latency from the return of the enqueue call (committed) to the start of the handler.

Public API only:
  * schema: ``jobs.db.migrate.upgrade(url)`` + ``scheduler.calendar_cache.store_holidays(url)``
    (the alembic migrations and the portals' stored holidays, as ``portalq migrate``);
    a 24/7 portal ``bench`` without a session limit (the SQL of tests/service_helpers.py
    ``add_local_portal``); the seeded portals stay as the migrations leave them.
  * job type: ``jobs.types.register(JobType("bench_noop", <pydantic model>, "bench"))``.
  * enqueue: ``jobs.queue.enqueue(..., conn=c)`` (one job, one transaction) and
    ``jobs.queue.enqueue_many([NewJob...], conn=c)`` (one transaction per batch) on one
    psycopg connection in autocommit mode (each call commits on its own, like the peers'
    autocommit enqueues; a caller's own transaction would add BEGIN/COMMIT).
  * worker: ``scheduler.worker.Worker`` wired as ``scheduler.service.serve`` wires it (its
    pool: ``scheduler.worker.make_pool``; ``Worker.start_loops``: the listen / claim /
    flush / heartbeat loops; ``Worker.stop_loops`` on SIGTERM), with
    ``register_handler("bench_noop", noop)``.
    Not included: the migration check at start and the APScheduler maintenance tick
    (its cost is measured apart by bench/tick_bench.py). PQ_WORKER=serve runs the whole
    ``scheduler.service.serve()`` instead (migration check + tick included).

Concurrency (Settings, env PORTALQ_*):
  * "def": ``Settings(workers=50)``, otherwise portalq's defaults (claim_batch=50, poll 1 s,
    heartbeat 10 s). portalq's own default, workers=4, is sized for browser jobs (one
    Chromium context each); PGQueuer's default concurrency is unlimited (batch_size=10),
    so the bench uses workers = claim_batch = 50, a claim can then fill a whole batch.
    PQ_DEF_WORKERS=<n> picks another value, PQ_DEF_WORKERS=default keeps workers=4.
  * "10": ``Settings(workers=10)``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import common  # noqa: E402
import psycopg  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from portalq.jobs import types  # noqa: E402
from portalq.jobs.queue import NewJob, enqueue, enqueue_many  # noqa: E402

DB = os.environ.get("PQ_DB", "peer_portalq")
JOB_TYPE = "bench_noop"
PORTAL = "bench"
ORDER = "bench"
DEF_WORKERS = os.environ.get("PQ_DEF_WORKERS", "50")   # "default": Settings() as is
WORKER_MODE = os.environ.get("PQ_WORKER", "worker")   # worker | serve
HOME = os.environ.get("PORTALQ_HOME", "/tmp/pq-peers/portalq-home")


class NoopPayload(BaseModel):
    i: int | None = None


types.register(types.JobType(JOB_TYPE, NoopPayload, PORTAL))


def _url() -> str:
    return common.dsn(DB)


def setup() -> None:
    from portalq.jobs.db.migrate import upgrade
    from portalq.scheduler.calendar_cache import store_holidays

    upgrade(_url())            # as `portalq migrate` does: the schema, then the holidays
    store_holidays(_url())
    with psycopg.connect(_url(), autocommit=True) as c:   # a 24/7 portal, no session limit
        c.execute("INSERT INTO portalq.portals (code, name, timezone, max_concurrent_sessions) "
                  "VALUES (%s, %s, 'UTC', NULL)", (PORTAL, PORTAL))
        c.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                  "SELECT %s, d, '00:00', '00:00' FROM generate_series(0, 6) d", (PORTAL,))


def _connect() -> psycopg.Connection[Any]:
    return psycopg.connect(_url(), autocommit=True)


async def enqueue_single(n: int) -> float:
    with _connect() as conn:
        t0 = time.perf_counter()
        for _ in range(n):
            enqueue(JOB_TYPE, ORDER, {}, conn=conn)             # one job, one txn
        return time.perf_counter() - t0


async def enqueue_batch(n: int, batch: int) -> float:
    with _connect() as conn:
        t0 = time.perf_counter()
        for off in range(0, n, batch):
            k = min(batch, n - off)
            enqueue_many([NewJob(JOB_TYPE, ORDER, {}) for _ in range(k)], conn=conn)
        return time.perf_counter() - t0


async def latency_enqueue(ids: list[int], gap: float) -> dict[int, float]:
    commits: dict[int, float] = {}
    with _connect() as conn:
        for i in ids:
            enqueue(JOB_TYPE, ORDER, {"i": i}, conn=conn)
            commits[i] = time.time()                              # committed
            await asyncio.sleep(gap)
    return commits


# ------------------------------------------------------------------ worker


def _settings(conc: str) -> Any:
    from portalq.scheduler.config import Settings

    kw: dict[str, Any] = {"database_url": _url()}
    if conc != "def":
        kw["workers"] = int(conc)
    elif DEF_WORKERS != "default":
        kw["workers"] = int(DEF_WORKERS)
    return Settings(**kw)


async def _run_worker(settings: Any) -> None:
    """portalq.scheduler.service.serve() minus the migration check and the tick: the same pool,
    the same settled heap, the same loops, the same graceful stop."""
    from portalq.jobs.db.location import database_url, libpq_dsn
    from portalq.scheduler.worker import Worker, make_pool

    dsn = libpq_dsn(database_url(settings.database_url))
    pool = make_pool(settings, dsn)
    await pool.open(wait=True, timeout=60)
    worker = Worker(settings, pool, dsn)
    await worker.refresh_portals()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if os.environ.get("PQ_GC_FREEZE", "1") != "0":   # as serve() does; 0: the A/B's before
        from portalq.scheduler.service import settle_heap

        settle_heap()
    loops = worker.start_loops()
    await stop.wait()
    await worker.stop_loops(loops, settings.grace_seconds)
    await pool.close()


def _trace_claims(path: str) -> None:
    """bench/pickup_trace.py: each claim's send and return time and its job count, one line
    a claim ('sent back n'), written by the worker's own claim call; and each garbage
    collection's start, end and generation (PATH.gc)."""
    from portalq.jobs import worker_api

    out = open(path, "a", buffering=1)   # noqa: SIM115 (open for the process's life)
    claim = worker_api.claim

    async def traced(*args: Any, **kw: Any) -> Any:
        sent = time.time()
        jobs = await claim(*args, **kw)
        out.write(f"{sent:.6f} {time.time():.6f} {len(jobs)}\n")
        return jobs

    worker_api.claim = traced   # this bench process's own module: the worker calls it there
    gc_out = open(path + ".gc", "a", buffering=1)   # noqa: SIM115
    began: list[float] = []

    def collected(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[:] = [time.time()]
        elif began:
            gc_out.write(f"{began[0]:.6f} {time.time():.6f} {info['generation']}\n")

    import gc

    gc.callbacks.append(collected)


def worker_main(conc: str, mode: str) -> None:
    os.environ.setdefault("PORTALQ_HOME", HOME)
    from portalq.scheduler import logs
    from portalq.scheduler.handlers import register_handler
    from portalq.scheduler.worker import Worker  # noqa: F401  (imported before the handshake)

    rec = common.LatencyRecorder() if mode == "latency" else None

    async def noop(ctx: Any) -> None:
        if rec is not None:
            i = ctx.payload.get("i")
            if i is not None:
                rec(int(i))

    register_handler(JOB_TYPE, noop)
    if os.environ.get("PQ_CLAIM_TRACE"):
        _trace_claims(os.environ["PQ_CLAIM_TRACE"])
    settings = _settings(conc)
    logs.setup(settings.log_format, settings.log_level)
    if WORKER_MODE == "serve":
        from portalq.scheduler.service import serve
        common.worker_handshake()
        asyncio.run(serve(settings))
        return
    common.worker_handshake()
    asyncio.run(_run_worker(settings))


def worker_cmd(conc: str, mode: str) -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    return [sys.executable, "-c",
            f"import sys; sys.path.insert(0, {here!r}); import bench_portalq as m; "
            "m.worker_main(sys.argv[1], sys.argv[2])", conc, mode]


def _version() -> str:
    from importlib.metadata import version

    return version("portalq")


def _meta_settings() -> dict[str, Any]:
    os.environ.setdefault("PORTALQ_HOME", HOME)
    d, c10 = _settings("def"), _settings("10")
    return {
        "driver": f"psycopg {psycopg.__version__}; enqueue: 1 autocommit connection; "
                  "worker: psycopg_pool AsyncConnectionPool(min 2, max workers+4) as serve() "
                  "makes it",
        "worker": "Worker listen/claim/flush/heartbeat loops as serve() wires them "
                  "(no migration check, no tick)" if WORKER_MODE != "serve"
                  else "portalq.scheduler.service.serve() (migration check + tick included)",
        "conc=def": f"workers={d.workers} ("
                    + ("Settings() default" if DEF_WORKERS == "default"
                       else "bench setting PQ_DEF_WORKERS") + f"), claim_batch={d.claim_batch}, "
                    f"poll_seconds={d.poll_seconds}",
        "conc=10": f"workers={c10.workers}, claim_batch={c10.claim_batch}",
        "portals": "bench (24/7, no session limit) + the 5 seeded by migration 0002",
        "loop": "asyncio",
        "source": os.path.dirname(os.path.dirname(os.path.abspath(types.__file__))),
    }


_UNFINISHED = "status IN ('pending','deferred','running')"

ADAPTER = common.Adapter(
    name="portalq",
    version=_version(),
    db=DB,
    setup=setup,
    # CASCADE: + artifacts, documents, escalations
    reset_sql="TRUNCATE portalq.job_queue, portalq.job_events CASCADE",
    pending_sql=f"SELECT count(*) FROM portalq.job_queue WHERE {_UNFINISHED}",
    exists_sql=f"SELECT EXISTS (SELECT 1 FROM portalq.job_queue WHERE {_UNFINISHED})",
    enqueue_single=enqueue_single,
    enqueue_batch=enqueue_batch,
    latency_enqueue=latency_enqueue,
    worker_cmd=worker_cmd,
    settings=_meta_settings(),
)

if __name__ == "__main__":
    common.main(ADAPTER, worker_main)

"""Shared parts of the scale benchmarks (bench/scale_bench.py): the bench's own PostgreSQL,
the two adapters (portalq's bench_portalq.py and bench/peers/bench_pgqueuer.py,
unchanged), server-side fills, and drain / pickup-latency figures that leave the waiting
jobs and the history in place (the peer harness's figures TRUNCATE between runs).

The server: PostgreSQL 15 (Debian's, the binaries `make bench` uses), its own data
directory under $PQB_HOME (/tmp/pq-bench), port $PQB_PORT (55436), default settings, so it
is never the tests' server nor the peer harness's. It is started if nothing answers there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HOME = Path(os.environ.get("PQB_HOME", "/tmp/pq-bench"))
PORT = os.environ.get("PQB_PORT", "55436")
PGBIN = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
PEERS = Path(__file__).resolve().parent / "peers"

# the adapters read these at import time
os.environ.update({"PGHOST": "127.0.0.1", "PGPORT": PORT, "PGUSER": "postgres",
                   "PQ_DB": os.environ.get("PQ_DB", "scale_portalq"),
                   "PGQ_DB": os.environ.get("PGQ_DB", "scale_pgqueuer"),
                   "LOGDIR": str(HOME / "logs"), "PORTALQ_HOME": str(HOME / "portalq-home")})
# no empty entry: that is the current directory, and a worker started from another
# checkout would import that checkout's portalq instead of its own
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in [str(PEERS), str(Path(__file__).resolve().parent),
                *os.environ.get("PYTHONPATH", "").split(os.pathsep)] if p)
sys.path[:0] = [str(PEERS), str(Path(__file__).resolve().parent)]

import bench_pgqueuer  # noqa: E402
import bench_portalq  # noqa: E402
import common  # noqa: E402
import psycopg  # noqa: E402

PQ, PGQ = bench_portalq.ADAPTER, bench_pgqueuer.ADAPTER
DATA = HOME / "pg" / "data"
LAT_SAMPLES = int(os.environ.get("LAT_SAMPLES", "200"))
LAT_GAP = float(os.environ.get("LAT_GAP_MS", "20")) / 1000.0


def _as_pg(args: list[str]) -> list[str]:
    return (["runuser", "-u", "postgres", "--"] + args) if os.getuid() == 0 else args


def ensure_server() -> None:
    """Start the bench's own cluster (initdb on first use); it is left running."""
    ready = [str(PGBIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", PORT]
    if subprocess.run(ready).returncode == 0:
        return
    (HOME / "logs").mkdir(parents=True, exist_ok=True)
    os.chmod(HOME, 0o755)
    if not (DATA / "PG_VERSION").exists():
        DATA.parent.mkdir(parents=True, exist_ok=True)
        if os.getuid() == 0:
            subprocess.run(["chown", "postgres:postgres", str(DATA.parent)], check=True)
        subprocess.run(_as_pg([str(PGBIN / "initdb"), "-D", str(DATA), "-U", "postgres",
                               "--auth=trust", "-E", "UTF8"]),
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run(_as_pg([str(PGBIN / "pg_ctl"), "-D", str(DATA), "-w",
                           "-l", str(DATA / "server.log"),
                           "-o", f"-p {PORT} -c listen_addresses=127.0.0.1 -k /tmp", "start"]),
                   check=True, stdout=subprocess.DEVNULL)


def stop_server() -> None:
    subprocess.run(_as_pg([str(PGBIN / "pg_ctl"), "-D", str(DATA), "-w", "-m", "fast", "stop"]),
                   stdout=subprocess.DEVNULL)


def sql(db: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(common.dsn(db), autocommit=True) as c:
        cur = c.execute(statement, params)
        return cur.fetchall() if cur.description else []


def one(db: str, statement: str, params: Any = None) -> Any:
    return sql(db, statement, params)[0][0]


def setup_both() -> None:
    for a in (PQ, PGQ):
        common.recreate_db(a.db)
        a.setup()
    (HOME / "logs").mkdir(parents=True, exist_ok=True)


# ------------------------------------------------------------------ server-side fills

def fill_waiting_portalq(n: int) -> None:
    """n jobs that are not due, on the open bench portal (the claim's own index range):
    half deferred to next week (a closed weekend), half scheduled 1-30 days ahead."""
    if n <= 0:
        return
    sql(PQ.db, """
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                               created_at, updated_at)
        SELECT 'bench_noop', 'waiting-' || g, 'bench', '{}'::jsonb,
               CASE WHEN g %% 2 = 0 THEN 'deferred' ELSE 'pending' END,
               CASE WHEN g %% 2 = 0 THEN now() + interval '7 days'
                    ELSE now() + interval '1 day' + (g %% 2592000) * interval '1 second' END,
               now(), now()
        FROM generate_series(1, %s) g""", (n,))
    sql(PQ.db, "VACUUM ANALYZE portalq.job_queue")


def fill_waiting_pgqueuer(n: int) -> None:
    """PGQueuer's equivalent: n queued jobs with execute_after 1-30 days ahead."""
    if n <= 0:
        return
    sql(PGQ.db, """
        INSERT INTO pgqueuer (priority, entrypoint, payload, status, execute_after)
        SELECT 0, 'noop', NULL, 'queued',
               now() + interval '1 day' + (g %% 2592000) * interval '1 second'
        FROM generate_series(1, %s) g""", (n,))
    sql(PGQ.db, "VACUUM ANALYZE pgqueuer")


def fill_history_portalq(n: int, *, days: float) -> None:
    """n completed jobs (ids and finished_at rising evenly over the last `days`) with
    their two events each (claimed, completed), in chunks of 1 M rows so that no one
    statement holds it all."""
    chunk = 1_000_000
    for off in range(0, n, chunk):
        k = min(chunk, n - off)
        sql(PQ.db, """
            WITH ins AS (
              INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                  attempts, lock_owner, started_at, result, created_at, updated_at, finished_at)
              SELECT 'bench_noop', 'hist-' || g, 'bench', '{"i": 1}'::jsonb, 'completed', t,
                     1, NULL, t, '{}'::jsonb, t, t, t
              FROM (SELECT g, now() - (1 - (g::float8 / %(n)s)) * %(days)s * interval '1 day'
                              - interval '1 hour' AS t
                    FROM generate_series(%(lo)s, %(hi)s) g) s
              RETURNING id, finished_at)
            INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, worker)
            SELECT id, finished_at, 1, s.f, s.t, 'w1'
            FROM ins CROSS JOIN (VALUES ('pending', 'running'), ('running', 'completed')) s(f, t)
            """, {"n": n, "days": days, "lo": off + 1, "hi": off + k})
        print(f"  history: {off + k:,} / {n:,} jobs", flush=True)
    sql(PQ.db, "VACUUM ANALYZE portalq.job_queue")
    sql(PQ.db, "VACUUM ANALYZE portalq.job_events")


# ------------------------------------------------------------------ figures

def max_id(a: common.Adapter) -> int:
    table = "portalq.job_queue" if a is PQ else "pgqueuer"
    return int(one(a.db, f"SELECT coalesce(max(id), 0) FROM {table}"))


def _left_sql(a: common.Adapter, base: int) -> str:
    """Any job above id `base` not finished: cheap (the waiting jobs are below `base`)."""
    if a is PQ:
        return (f"SELECT EXISTS (SELECT 1 FROM portalq.job_queue WHERE id > {base} AND status IN "
                f"('pending','deferred')) OR EXISTS "
                f"(SELECT 1 FROM portalq.job_queue WHERE id > {base} "
                "AND status = 'running')")
    return f"SELECT EXISTS (SELECT 1 FROM pgqueuer WHERE id > {base})"


def _count_sql(a: common.Adapter, base: int) -> str:
    if a is PQ:
        return (f"SELECT count(*) FROM portalq.job_queue WHERE id > {base} AND status IN "
                "('pending','deferred','running')")
    return f"SELECT count(*) FROM pgqueuer WHERE id > {base}"


def reset(a: common.Adapter, base: int) -> None:
    """Remove what a figure added above id `base`; the waiting jobs and history stay."""
    if a is PQ:
        sql(a.db, "DELETE FROM portalq.job_queue WHERE id > %s", (base,))
        sql(a.db, "DELETE FROM portalq.job_events WHERE job_id > %s", (base,))
        sql(a.db, "VACUUM ANALYZE portalq.job_queue, portalq.job_events")
    else:
        sql(a.db, "DELETE FROM pgqueuer WHERE id > %s", (base,))
        sql(a.db, "TRUNCATE pgqueuer_log, pgqueuer_statistics")
        sql(a.db, "VACUUM ANALYZE pgqueuer")
    sql(a.db, "CHECKPOINT")


def drain(a: common.Adapter, n: int, conc: str = "def", procs: int = 1,
          timeout: float = float(os.environ.get("DRAIN_TIMEOUT", "45"))) -> dict[str, Any]:
    import asyncio

    base = max_id(a)
    asyncio.run(a.enqueue_batch(n, 1000))
    sql(a.db, "ANALYZE")
    sql(a.db, "CHECKPOINT")
    ws = common.start_workers(a, procs, conc, "drain", dict(os.environ), str(HOME / "logs"))
    left = _left_sql(a, base)
    try:
        with psycopg.connect(common.dsn(a.db), autocommit=True) as poll:
            t0 = time.perf_counter()
            for w in ws:
                w.go()
            capped = False
            while poll.execute(left).fetchone()[0]:
                if time.perf_counter() - t0 > timeout:
                    capped = True           # reported as the rate of the jobs done so far
                    break
                if any(w.p.poll() is not None for w in ws):
                    raise RuntimeError(f"{a.name}: a worker died; see {HOME}/logs")
                time.sleep(0.02)
            dt = time.perf_counter() - t0
            done = n - (poll.execute(_count_sql(a, base)).fetchone()[0] if capped else 0)
    finally:
        for w in ws:
            w.stop()
    reset(a, base)
    return {"jobs_s": done / dt, "secs": dt, "capped": capped}


def read_starts(lat_file: Path) -> dict[int, float]:
    """The handlers' start times a latency worker wrote (LAT_FILE: 'idx t_start')."""
    d: dict[int, float] = {}
    if lat_file.exists():
        for line in lat_file.read_text().splitlines():
            p = line.split()
            if len(p) == 2:
                d[int(p[0])] = float(p[1])
    return d


def latency(a: common.Adapter, during: Any = None) -> dict[str, Any]:
    """Pickup latency (commit of an enqueue -> handler start), one idle worker,
    LAT_SAMPLES samples LAT_GAP apart. `during`: a callable started (in a thread) after the
    warm-up and joined after the samples -- e.g. a prune."""
    import asyncio
    import threading

    base = max_id(a)
    lat_file = HOME / "logs" / f"{a.name}-lat.txt"
    lat_file.unlink(missing_ok=True)
    ws = common.start_workers(a, 1, "def", "latency", {**os.environ, "LAT_FILE": str(lat_file)},
                              str(HOME / "logs"))

    def seen() -> dict[int, float]:
        return read_starts(lat_file)

    def wait_for(ids: set[int], timeout: float) -> dict[int, float]:
        end = time.time() + timeout
        while True:
            d = seen()
            if ids <= d.keys() or time.time() > end:
                return d
            time.sleep(0.05)

    th = None
    extra: dict[str, Any] = {}
    try:
        ws[0].go()
        warm = [1_000_001, 1_000_002, 1_000_003]
        asyncio.run(a.latency_enqueue(warm, 0.05))
        if not set(warm) <= wait_for(set(warm), 30).keys():
            raise RuntimeError(f"{a.name}: the latency worker did not take the warm-up jobs")
        time.sleep(0.5)
        if during is not None:
            th = threading.Thread(target=lambda: extra.update(during() or {}))
            th.start()
        # samples go on while `during` runs (at least LAT_SAMPLES of them)
        ids, commits = [], {}
        while len(ids) < LAT_SAMPLES or (th is not None and th.is_alive()):
            chunk = list(range(len(ids), len(ids) + 50))
            commits.update(asyncio.run(a.latency_enqueue(chunk, LAT_GAP)))
            ids += chunk
        d = wait_for(set(ids), 60)
    finally:
        if th is not None:
            th.join()
        for w in ws:
            w.stop()
    lats = [(d[i] - commits[i]) * 1000.0 for i in ids if i in d]
    reset(a, base)
    return {"p50_ms": common.pct(lats, 50), "p99_ms": common.pct(lats, 99),
            "max_ms": max(lats) if lats else float("nan"), "missing": len(ids) - len(lats), **extra}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def claim_cost(due: int, runs: int = 5) -> dict[str, float]:
    """The claim statement alone with `due` jobs due (inserted, then rolled back), EXPLAIN
    ANALYZE: server time and buffers touched, median of `runs` -- much less disturbed by
    the machine's load than a pickup latency."""
    from portalq.jobs import clock
    from portalq.jobs.db.sql import statement

    params = {"portals": ["bench"], "limits": [None], "limit": 50, "portal_count": 1,
              "worker": "x", "now": clock.now(), "job_types": None,
              "key_ids": None}
    ms, bufs = [], []
    with psycopg.connect(common.dsn(PQ.db)) as c:
        for _ in range(runs):
            c.execute("""INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status,
                             run_at, created_at, updated_at)
                         SELECT 'bench_noop', 'due', 'bench', '{}', 'pending',
                                now() - interval '1 minute', now(), now()
                         FROM generate_series(1, %s)""", (due,))
            plan = c.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                             + statement("claim", params),
                             params).fetchone()[0][0]
            ms.append(plan["Execution Time"])
            bufs.append(plan["Plan"].get("Shared Hit Blocks", 0)
                        + plan["Plan"].get("Shared Read Blocks", 0))
            c.rollback()
    return {"ms": sorted(ms)[len(ms) // 2], "buffers": sorted(bufs)[len(bufs) // 2]}

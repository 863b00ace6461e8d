"""The console's front page ("/": the "Needs you" items, then the overview) with many failed
jobs, uncached: its server time, and where the time goes (the SQL of each part, grouping,
the template).

    python bench/needs_bench.py                        # 10,000 failed jobs in 200,000 rows
    NEEDS_FAILED=50000 NEEDS_ROWS=1000000 python bench/needs_bench.py
    NEEDS_EXPLAIN=1 python bench/needs_bench.py        # EXPLAIN (ANALYZE, BUFFERS) as well
    NEEDS_REUSE=1 python bench/needs_bench.py          # the data of the last run again

Data (portalq's embedded PostgreSQL, a scratch database): NEEDS_ROWS jobs, of which
NEEDS_FAILED failed after five attempts, each with its "attempts" escalation and an error
from one of a few causes per portal (digits differing: order numbers), a checkpoint of a
few steps; the rest completed. VACUUM ANALYZE after.

Server time: the ``Server-Timing`` of ``portalq console`` (a process of its own) for "/"
with the overview's numbers forced fresh each time (PORTALQ_CONSOLE_LIVE_REFRESH_SECONDS=0.001
and a pause of 25x the last computation between requests) and for "/needs" (never cached).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import console_bench  # noqa: E402

ROWS = int(os.environ.get("NEEDS_ROWS", "200000"))
FAILED = int(os.environ.get("NEEDS_FAILED", "10000"))
REQUESTS = int(os.environ.get("NEEDS_REQUESTS", "20"))
DB = "portalq_needs_bench"
#: the page's queries (those of this version of portalq are timed)
QUERIES = ("console_needs_failed_groups", "console_needs_uncertain", "console_needs_waiting",
           "console_needs_you", "console_needs_waiting_count", "console_depth")


def prepare(pg: Any) -> str:
    from portalq.jobs.db.migrate import upgrade

    with psycopg.connect(pg.dsn("postgres"), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{DB}"')
    dsn = pg.dsn(DB)
    upgrade(dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    t0 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, priority,
                                       run_at, attempts, max_attempts, created_at, updated_at,
                                       finished_at, last_error, checkpoint)
        SELECT (ARRAY['name_search', 'file_entity', 'obtain_ein', 'process_crtc'])[1 + g %% 4],
               'ORD-' || g,
               (ARRAY['bc_corporate_online', 'delaware_icis', 'irs_ein', 'crtc'])[1 + g %% 4],
               jsonb_build_object('legal_name', 'Company ' || g || ' Ltd.'),
               CASE WHEN g %% %(every)s = 0 THEN 'failed' ELSE 'completed' END, 0,
               now() - (%(n)s - g) * interval '1 second', 5, 5,
               now() - (%(n)s - g) * interval '1 second', now(), now(),
               CASE WHEN g %% %(every)s = 0 THEN
                 (ARRAY['portal answered 503 Service Unavailable for order ORD-' || g,
                        'timed out after 30000 ms waiting for the page of order ORD-' || g,
                        'the session expired at step 3 of 5 (attempt ' || g %% 5 || ')'])
                 [1 + (g / %(every)s) %% 3] END,
               jsonb_build_object('step', 'submit', 'screens', jsonb_build_array(1, 2, 3),
                                  'note', repeat('x', 200))
        FROM generate_series(1, %(n)s) g""",
                  {"n": ROWS, "every": max(1, ROWS // FAILED)})
        c.execute("""
        INSERT INTO portalq.escalations (job_id, attempt, kind, reason, created_at,
                                         next_try_at, sent_at)
        SELECT id, 5, 'attempts', 'every attempt failed: ' || last_error, finished_at,
               finished_at, finished_at
        FROM portalq.job_queue WHERE status = 'failed'""")
        c.execute("VACUUM ANALYZE")
        n = c.execute("SELECT count(*) FROM portalq.job_queue WHERE status = 'failed'"
                      ).fetchone()[0]
    print(f"data: {ROWS:,} rows, {n:,} failed, in {time.perf_counter() - t0:.0f} s",
          file=sys.stderr)
    return dsn


def parts(dsn: str) -> None:
    """The time of each part of the page, in this process (median of 5, ms)."""
    from portalq.jobs import clock
    from portalq.jobs.admin import needs as console_needs
    from portalq.jobs.db import sql
    from portalq.scheduler.console.pages_overview import compute

    def timed(f: Any) -> float:
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            f()
            runs.append((time.perf_counter() - t0) * 1000)
        return statistics.median(runs)

    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as c:
        now = clock.now()
        params = {"now": now, "limit": 200, "cap": 1000, "ids_cap": console_needs.BULK_CAP}
        out = {f"SQL {name}": timed(lambda n=name: sql.fetch(c, n, params))
               for name in QUERIES}
        out["needs page data (all of it)"] = timed(lambda: console_needs.page(c))
        out["overview numbers (uncached)"] = timed(lambda: compute(c, {}))
        for label, ms in out.items():
            print(f"  {label:<40} {ms:8.1f}")
        if os.environ.get("NEEDS_EXPLAIN") == "1":
            for name in QUERIES:
                plan = c.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql.statement(name, params),
                                 params).fetchall()
                print(f"\n{name}:\n" + "\n".join(r[0] for r in plan))


def served(base: str, client: Any) -> None:
    for path in ("/", "/needs"):
        times = []
        for _ in range(3):
            client.get(path)
        for _ in range(REQUESTS):
            took, body = client.get(path)
            times.append(took)
            time.sleep(min(2.0, 25 * took / 1000))   # past the refresh period: uncached
        print(f"  {path:<8} {statistics.median(times):7.1f} / {max(times):7.1f} ms "
              f"(median / max server time), {len(body):,} bytes")


def main() -> None:
    pg = console_bench.server()
    dsn = pg.dsn(DB) if os.environ.get("NEEDS_REUSE") == "1" else prepare(pg)
    from portalq.jobs.admin import users as console_users
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DELETE FROM portalq.console_users")
        console_users.add_user(c, "bench", "admin", console_bench.PASSWORD)
    print(f"\nparts, {FAILED:,} failed jobs in {ROWS:,} rows (median ms)")
    parts(dsn)
    os.environ["PORTALQ_CONSOLE_LIVE_REFRESH_SECONDS"] = "0.001"
    srv, base = console_bench.start_console(dsn)
    try:
        client = console_bench.Client(base)
        client.sign_in("bench")
        print("\nserved, uncached")
        served(base, client)
    finally:
        srv.terminate()
        srv.wait(20)


if __name__ == "__main__":
    main()

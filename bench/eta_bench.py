"""The cost of an ETA refresh (issue 41): the pure estimator (portals/eta/) on a
synthetic snapshot of the built-in portals' calendars.

    python bench/eta_bench.py                 # 10,000 waiting jobs + 1,000 orders
    ETA_JOBS=100000 ETA_ORDERS=0 python bench/eta_bench.py
    python bench/eta_bench.py --large         # 100,000 waiting jobs + 1,000 orders
    python bench/eta_bench.py --db            # also the loader on an embedded database

The waiting jobs are spread over the five seeded portals (sessions as seeded: the IRS one,
Delaware and BC two, the CRTC two, mail ten), due from an hour ago to two days ahead, a
tenth at a higher priority, every EIN application under a rate key (one per responsible
party per IRS day; a party has two). Each order is a Delaware filing (pending) with its
EIN application and delivery held after it. Durations as measured per (type, portal).
Prints the median of ETA_RUNS refreshes, the time per job estimated, and the horizon.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from portalq.portals.eta import Checks, Duration, Job, PortalState, Snapshot, estimate  # noqa: E402
from portalq.portals.presets import PRESETS, calendar_from_preset  # noqa: E402
from portalq.portals.steps import STEPS  # noqa: E402

JOBS = int(os.environ.get("ETA_JOBS", "10000"))
ORDERS = int(os.environ.get("ETA_ORDERS", "1000"))
RUNS = int(os.environ.get("ETA_RUNS", "5"))
NOW = datetime(2026, 12, 7, 15, tzinfo=UTC)   # a Monday, 10:00 ET
MIN = timedelta(minutes=1)
TYPES = {"irs_ein": "obtain_ein", "delaware_icis": "file_entity",
         "bc_corporate_online": "name_search", "crtc": "process_crtc", "email": "deliver"}
DURATIONS = {("obtain_ein", "irs_ein"): Duration(3 * MIN, 6 * MIN, 200),
             ("file_entity", "delaware_icis"): Duration(4 * MIN, 9 * MIN, 200),
             ("name_search", "bc_corporate_online"): Duration(2 * MIN, 5 * MIN, 200),
             ("process_crtc", "crtc"): Duration(5 * MIN, 12 * MIN, 200),
             ("deliver", "email"): Duration(MIN / 6, MIN, 200)}
PROCESSING = {"delaware_icis": Duration(timedelta(hours=24), timedelta(hours=48)),
              "bc_corporate_online": Duration(timedelta(hours=12), timedelta(hours=24))}
#: their lookups' checks (portals/lookups.py), as the loader gives them
CHECKS = {"delaware_icis": Checks(timedelta(minutes=15), 2.0, timedelta(hours=4)),
          "bc_corporate_online": Checks(timedelta(minutes=30), 1.5, timedelta(hours=4))}


def snapshot(jobs: int, orders: int, seed: int = 41) -> Snapshot:
    rnd = random.Random(seed)
    portals = {code: PortalState(calendar_from_preset(code), p.max_concurrent_sessions or 4,
                                 steps=tuple(c for (pc, _), c in STEPS.items() if pc == code))
               for code, p in PRESETS.items()}
    codes = list(TYPES)
    out: list[Job] = []
    for i in range(1, jobs + 1):
        code = rnd.choice(codes)
        limited = code == "irs_ein"
        out.append(Job(i, TYPES[code], code, 5 if rnd.random() < 0.1 else 0,
                       NOW + timedelta(minutes=rnd.randint(-60, 2 * 24 * 60)),
                       f"party-{i // 2}" if limited else None, 1 if limited else None,
                       "one per responsible party per IRS business day" if limited else "",
                       PROCESSING.get(code), checks=CHECKS.get(code)))
    n = jobs
    for _ in range(orders):
        filing, ein, deliver = n + 1, n + 2, n + 3
        n += 3
        out += [Job(filing, "file_entity", "delaware_icis", run_at=NOW,
                    processing=PROCESSING["delaware_icis"], checks=CHECKS["delaware_icis"]),
                Job(ein, "obtain_ein", "irs_ein", after=(filing,)),
                Job(deliver, "deliver", "email", after=(filing, ein))]
    return Snapshot(NOW, portals, out, DURATIONS)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", action="store_true",
                        help="also time the loader (scheduler/estimates.py) on a database")
    parser.add_argument("--large", action="store_true",
                        help="100,000 waiting jobs (issue 41's target: a second a refresh)")
    args = parser.parse_args()
    jobs = 100_000 if args.large else JOBS
    snap = snapshot(jobs, ORDERS)
    t0, c0 = time.perf_counter(), time.process_time()
    sum(i * i for i in range(1_000_000))
    print(f"reference: a million-step Python loop takes {(time.perf_counter() - t0) * 1000:.0f}"
          f" ms on this machine now ({(time.process_time() - c0) * 1000:.0f} ms CPU; about 45 "
          "on an idle core)")
    times, cpu = [], []
    for _ in range(RUNS):
        t0, c0 = time.perf_counter(), time.process_time()
        est = estimate(snap)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    med = statistics.median(times)
    last = max(e.finish90 for e in est.values() if e.finish90 is not None)
    unknown = sum(e.finish50 is None for e in est.values())
    print(f"{len(snap.jobs)} jobs ({jobs} waiting + {ORDERS} orders of 3 steps): "
          f"median {med * 1000:.0f} ms per refresh over {RUNS} "
          f"(min {min(times) * 1000:.0f}; CPU time {statistics.median(cpu) * 1000:.0f}: the "
          f"rest is waiting for a shared core), {med / len(snap.jobs) * 1e6:.1f} µs per job; "
          f"last p90 finish {last:%Y-%m-%d %H:%M} UTC, {unknown} without an estimate")
    if args.db:
        _db(snap)


def _db(snap: Snapshot) -> None:
    """The loader on an embedded database holding the same jobs not held (plain rows)."""
    import tempfile

    import psycopg

    from portalq.jobs.db.embedded import EmbeddedPostgres, owner_url
    from portalq.jobs.db.migrate import upgrade
    from portalq.scheduler import estimates as eta
    pg = EmbeddedPostgres(Path(tempfile.gettempdir()) / "portalq-etabench")
    pg.ensure_running()
    try:
        with psycopg.connect(pg.dsn("postgres"), autocommit=True) as c:
            c.execute('DROP DATABASE IF EXISTS "portalq_eta" WITH (FORCE)')
            c.execute('CREATE DATABASE "portalq_eta"')
        dsn = pg.dsn("portalq_eta")
        upgrade(owner_url(pg.url("portalq_eta")))
        with psycopg.connect(dsn, autocommit=True) as c:
            with c.cursor().copy(
                    "COPY portalq.job_queue (job_type, order_id, portal, payload, priority, "
                    "run_at, rate_key, created_at, updated_at) FROM STDIN") as cp:
                for j in snap.jobs:
                    if not j.after:
                        cp.write_row((j.job_type, f"B-{j.id}", j.portal, "{}", j.priority,
                                      j.run_at, j.rate_key, NOW, NOW))
            c.execute("ANALYZE portalq.job_queue")
            times = []
            for _ in range(RUNS):
                t0 = time.perf_counter()
                eta.load(c, NOW, workers=4)
                times.append(time.perf_counter() - t0)
        print(f"loader + estimator on the database: median "
              f"{statistics.median(times) * 1000:.0f} ms per refresh")
    finally:
        pg.stop()


if __name__ == "__main__":
    main()

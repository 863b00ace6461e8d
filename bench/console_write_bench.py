"""What the console's search (migration 0026) costs the queue's writes, at 1 M job rows:
every arm alternated with the others in the same run, CONSOLE_WRITE_ROUNDS rounds, medians.

    python bench/console_write_bench.py            # on bench/console_bench.py's database
    CONSOLE_REUSE=1 python bench/console_write_bench.py

The database is console_bench.py's (CONSOLE_ROWS rows, made or reused by its ``prepare``).

- Claim: CONSOLE_CLAIM_JOBS pending jobs with a ``legal_name`` drained by one claimer (claim
  50, complete them; jobs.worker_api as the worker calls it) with the head schema
  ("side table": job_search written once at the enqueue, untimed), with none of 0026's
  objects ("none": its two btree indexes on job_queue dropped, the triggers disabled), and
  with the first design's trigram indexes on job_queue itself ("trigram on job_queue": the
  same GIN indexes on ``payload #>> path``, written at each status change); and with
  job_search but not 0026's two btree indexes on job_queue ("job_search only"). Indexes
  are built and dropped between the drains (untimed).
- Enqueue: enqueue_many of CONSOLE_ENQUEUE_JOBS jobs (the COPY path) with a ``legal_name``
  and with payload ``{}``, with job_search's insert trigger and with it disabled.
- Search: the search's statement, this design's and the first one's, alternated.
- Prune: prune_finished (batches of 10,000, as the worker calls it) of CONSOLE_ENQUEUE_JOBS
  finished jobs, with and without job_search (without: no row written, no foreign key, so
  no cascade to look for one).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import console_bench as cb
import psycopg
from pydantic import BaseModel, ConfigDict

from portalq.jobs import types
from portalq.jobs.db import sql
from portalq.jobs.queue import NewJob, enqueue_many

ROUNDS = int(os.environ.get("CONSOLE_WRITE_ROUNDS", "3"))
ENQUEUE_JOBS = int(os.environ.get("CONSOLE_ENQUEUE_JOBS", "20000"))
FIELDS = {"legal_name": "{legal_name}", "company_name": "{company_name}",
          "names": "{names}", "applicant_name": "{applicant,name}"}


class Named(BaseModel):
    model_config = ConfigDict(extra="forbid")
    legal_name: str | None = None


types.register(types.JobType("bench_named", Named, "benchq"))


def _set(c: psycopg.Connection[Any], arm: str) -> None:
    """The schema of ``arm`` (from any other arm's): "none" (no 0026 object on the queue,
    its trigger off), "job_search only" (the trigger on, not the two btree indexes),
    "side table" (the head: both), "trigram on job_queue" (the first design: the btree
    indexes and a trigram index per field on job_queue)."""
    trg = "DISABLE" if arm == "none" else "ENABLE"
    c.execute(f"ALTER TABLE portalq.job_queue {trg} TRIGGER job_queue_search_insert")
    for name, cols in (("job_queue_portal_id", "portal, id"),
                       ("job_queue_type_id", "job_type, id")):
        if arm in ("none", "job_search only"):
            c.execute(f"DROP INDEX IF EXISTS portalq.{name}")
        else:
            c.execute(f"CREATE INDEX IF NOT EXISTS {name} ON portalq.job_queue ({cols})")
    for name, path in FIELDS.items():
        if arm == "trigram on job_queue":
            c.execute(f"CREATE INDEX IF NOT EXISTS job_queue_search_{name} ON portalq.job_queue "
                      f"USING gin ((payload #>> '{path}'::text[]) portalq.gin_trgm_ops) "
                      f"WHERE (payload #>> '{path}'::text[]) IS NOT NULL")
        else:
            c.execute(f"DROP INDEX IF EXISTS portalq.job_queue_search_{name}")


def _trigger(c: psycopg.Connection[Any], on: bool) -> None:
    """job_search's insert trigger alone on or off (job_queue's indexes as they are)."""
    c.execute(f"ALTER TABLE portalq.job_queue {'ENABLE' if on else 'DISABLE'} "
              "TRIGGER job_queue_search_insert")


def alternate(arms: list[str], run: Callable[[str], float]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {a: [] for a in arms}
    for _ in range(ROUNDS):
        for arm in arms:
            out[arm].append(run(arm))
    return out


def show(title: str, rates: dict[str, list[float]], unit: str) -> None:
    print(f"\n{title} ({ROUNDS} rounds, alternated; median (min-max) {unit})")
    for arm, values in rates.items():
        print(f"  {arm:<36} {statistics.median(values):9,.0f} "
              f"({min(values):,.0f}-{max(values):,.0f})")


def claim(dsn: str) -> None:
    def run(arm: str) -> float:
        with psycopg.connect(dsn, autocommit=True) as c:
            _set(c, arm)
            c.execute("CHECKPOINT")
        rate = asyncio.run(cb.drain(dsn, cb.CLAIM_JOBS))
        with psycopg.connect(dsn, autocommit=True) as c:   # the same table for every drain
            c.execute("DELETE FROM portalq.job_queue WHERE order_id LIKE 'CLAIM-%%'")
            c.execute("VACUUM portalq.job_queue, portalq.job_search")
        return rate

    arms = ["side table", "none", "job_search only", "trigram on job_queue"]
    show(f"claim throughput, {cb.CLAIM_JOBS:,} jobs with a legal_name per drain", alternate(
        arms, run), "jobs/s")
    with psycopg.connect(dsn, autocommit=True) as c:
        _set(c, "side table")


def enqueue(dsn: str) -> None:
    def run(arm: str) -> float:
        named = arm.startswith("legal_name")
        jobs = [NewJob("bench_named", f"ENQ-{i}",
                       {"legal_name": f"Enqueued {i} Holdings Ltd."} if named else {})
                for i in range(ENQUEUE_JOBS)]
        with psycopg.connect(dsn, autocommit=True) as c:
            _trigger(c, not arm.endswith("no trigger"))
            c.execute("CHECKPOINT")
            t0 = time.perf_counter()
            enqueue_many(jobs, conn=c)
            rate = ENQUEUE_JOBS / (time.perf_counter() - t0)
            c.execute("DELETE FROM portalq.job_queue WHERE order_id LIKE 'ENQ-%%'")
            c.execute("VACUUM portalq.job_queue, portalq.job_search")
        return rate

    arms = ["legal_name, trigger", "legal_name, no trigger", "{}, trigger", "{}, no trigger"]
    show(f"batch enqueue, enqueue_many of {ENQUEUE_JOBS:,} jobs (COPY)", alternate(arms, run),
         "jobs/s")
    with psycopg.connect(dsn, autocommit=True) as c:
        _trigger(c, True)


def prune(dsn: str) -> None:
    def run(arm: str) -> float:
        side = arm.endswith("job_search")
        with psycopg.connect(dsn, autocommit=True) as c:
            _trigger(c, side)
            if not side:
                c.execute("ALTER TABLE portalq.job_search DROP CONSTRAINT IF EXISTS "
                          "job_search_job_id_fkey")
            payload = ("jsonb_build_object('legal_name', 'Pruned ' || g || ' Ltd.')"
                       if arm.startswith("legal_name") else "'{}'::jsonb")
            c.execute(f"""
                INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status,
                                               run_at, created_at, updated_at, finished_at)
                SELECT 'bench_named', 'PRUNE-' || g, 'benchq', {payload}, 'completed',
                       now() - interval '400 days', now() - interval '400 days', now(),
                       now() - interval '400 days'
                FROM generate_series(1, %s) g""", (ENQUEUE_JOBS,))
            c.execute("VACUUM ANALYZE portalq.job_queue, portalq.job_search")
            c.execute("CHECKPOINT")
            before = cb.datetime.now(cb.UTC) - timedelta(days=365)
            params = {"before": before, "failed_before": before, "limit": 10_000}
            t0 = time.perf_counter()
            done = 0
            while True:
                with c.transaction():
                    n = sql.fetch_one(c, "prune_finished", params)["pruned"]
                if not n:
                    break
                done += n
            rate = done / (time.perf_counter() - t0)
            assert done == ENQUEUE_JOBS, done
            if not side:
                c.execute("ALTER TABLE portalq.job_search ADD CONSTRAINT job_search_job_id_fkey "
                          "FOREIGN KEY (job_id) REFERENCES portalq.job_queue (id) "
                          "ON DELETE CASCADE")
        return rate

    arms = ["legal_name, job_search", "legal_name, no job_search", "{}, job_search",
            "{}, no job_search"]
    show(f"prune of {ENQUEUE_JOBS:,} finished jobs (prune_finished, batches of 10,000)",
         alternate(arms, run), "jobs/s")
    with psycopg.connect(dsn, autocommit=True) as c:
        _trigger(c, True)


#: the first design's search (trigram indexes on job_queue itself), for the comparison
OLD_SEARCH = """
SELECT j.id, j.job_type, j.order_id, j.portal, j.status, j.priority, j.run_at, j.attempts,
       j.max_attempts, j.last_error, j.created_at, j.updated_at, j.finished_at,
       j.checkpoint->>'step' AS step
FROM portalq.job_queue j
WHERE id + 0 < %(before_id)s AND id + 0 >= %(floor_id)s
  AND (payload #>> '{legal_name}'::text[]) ILIKE %(field_like)s
ORDER BY id + 0 DESC LIMIT %(limit)s"""


def search(dsn: str) -> None:
    """The search's statement alone (the part of the page that changed): job_search's
    trigram index then the job by primary key, against the first design's statement on
    job_queue's own trigram index; alternated, CONSOLE_SEARCH_RUNS runs each."""
    from portalq.jobs.admin.reads import JobFilter

    runs = int(os.environ.get("CONSOLE_SEARCH_RUNS", "20"))
    texts = ["company 17 ltd", "company 4242", "no such company"]
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as c:
        _set(c, "trigram on job_queue")
        c.execute("VACUUM ANALYZE portalq.job_queue, portalq.job_search")
        print(f"\nthe search statement at ~{cb.ROWS:,} rows (median (min-max) ms, {runs} runs "
              "each, alternated)")
        for text in texts:
            params = {**JobFilter(field="legal_name", value=text).params(),
                      "before_id": 2**62, "floor_id": 0, "limit": 50}
            times: dict[str, list[float]] = {"job_search": [], "trigram on job_queue": []}
            found = {}
            for _ in range(runs):
                for arm, statement in (("job_search", sql.query("console_jobs_search")),
                                       ("trigram on job_queue", OLD_SEARCH)):
                    t0 = time.perf_counter()
                    rows = c.execute(statement, params).fetchall()
                    times[arm].append((time.perf_counter() - t0) * 1000)
                    found[arm] = len(rows)
            assert found["job_search"] == found["trigram on job_queue"], found
            for arm, values in times.items():
                print(f"  '{text}' ({found[arm]} rows), {arm:<22} "
                      f"{statistics.median(values):7.1f} ({min(values):.1f}-{max(values):.1f})")
        _set(c, "side table")


def main() -> None:
    pg = cb.server()
    dsn, _ = cb.prepare(pg)
    with psycopg.connect(dsn, autocommit=True) as c:
        rows = c.execute("SELECT reltuples::bigint FROM pg_class "
                         "WHERE oid = 'portalq.job_queue'::regclass").fetchone()[0]
    print(f"job_queue: ~{rows:,} rows", file=sys.stderr)
    asyncio.run(cb.drain(dsn, cb.CLAIM_JOBS // 4))  # warm-up
    what = os.environ.get("CONSOLE_WRITE_PARTS", "enqueue,prune,claim,search").split(",")
    for part in what:
        {"claim": claim, "enqueue": enqueue, "prune": prune, "search": search}[part](dsn)


if __name__ == "__main__":
    main()

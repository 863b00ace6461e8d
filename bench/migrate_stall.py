"""How long `portalq migrate` makes the business's writes wait: migration 0026 (the console's
search) on a queue of N existing jobs, while a writer enqueues one job every 20 ms in its own
transactions (as the business's application does) and, now and then, patches a payload.

    .venv/bin/python bench/migrate_stall.py [N] [--prebuilt]     # N: default 1,000,000

``--prebuilt``: the two btrees a DBA may build ``CONCURRENTLY`` before migrating (the
migration then skips them), built while the writer runs and timed apart.

A scratch embedded PostgreSQL under the temp dir, migrated to 0025, N jobs with a legal
name, then `upgrade(head)` timed. Prints the migration's time, the writer's longest wait
and its p99, and checks what the migration must leave: one ``job_search`` row per job with a
searchable field -- those written before it, during it and after it -- with the current
text.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from portalq.jobs.db.embedded import EmbeddedPostgres  # noqa: E402
from portalq.jobs.db.migrate import upgrade  # noqa: E402

DB = "portalq_migrate_stall"
INSERT = """INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                           created_at, updated_at)
            VALUES ('file_entity', %s, 'delaware_icis', %s::jsonb, 'pending', now(), now(),
                    now()) RETURNING id"""


def _database() -> tuple[str, str]:
    pg = EmbeddedPostgres(Path(tempfile.gettempdir()) / "portalq-migrate-stall")
    pg.ensure_running()
    pg.recreate_database(DB)
    dsn = pg.dsn(DB)
    return dsn, dsn.replace("postgresql://", "postgresql+psycopg://", 1)


class Writer(threading.Thread):
    """One enqueue every 20 ms (a transaction each), every tenth a payload patch of an
    existing job; each statement's wall time kept."""

    def __init__(self, dsn: str, first_id: int) -> None:
        super().__init__(daemon=True)
        self.dsn, self.first_id = dsn, first_id
        self.waits: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            n = 0
            while not self.stop.is_set():
                n += 1
                t = time.perf_counter()
                if n % 10:
                    c.execute(INSERT, (f"ORD-W-{n}", f'{{"legal_name": "Written {n} Ltd."}}'))
                else:
                    c.execute("""UPDATE portalq.job_queue SET payload = payload
                                   || jsonb_build_object('legal_name', 'Patched ' || id),
                                   updated_at = now() WHERE id = %s""", (self.first_id + n,))
                self.waits.append(time.perf_counter() - t)
                time.sleep(0.02)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 1_000_000
    dsn, url = _database()
    upgrade(url, "0025")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("""INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status,
                       run_at, created_at, updated_at, finished_at)
                     SELECT 'file_entity', 'ORD-' || g, 'delaware_icis',
                            jsonb_build_object('legal_name', 'Company ' || g || ' Ltd.'),
                            'completed', now(), now(), now(), now()
                     FROM generate_series(1, %s) g""", (n,))
        c.execute("VACUUM ANALYZE portalq.job_queue")
        first = c.execute("SELECT min(id) FROM portalq.job_queue").fetchone()[0]   # type: ignore[index]
    writer = Writer(dsn, first)
    writer.start()
    time.sleep(1)
    if "--prebuilt" in sys.argv:
        t = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("CREATE INDEX CONCURRENTLY job_queue_portal_id "
                      "ON portalq.job_queue (portal, id)")
            c.execute("CREATE INDEX CONCURRENTLY job_queue_type_id "
                      "ON portalq.job_queue (job_type, id)")
        print(f"the two btrees built CONCURRENTLY first: {time.perf_counter() - t:.1f} s, "
              f"the writer's longest wait meanwhile {max(writer.waits):.2f} s")
    before = len(writer.waits)
    t = time.perf_counter()
    upgrade(url)
    took = time.perf_counter() - t
    time.sleep(1)
    writer.stop.set()
    writer.join()
    during = sorted(writer.waits[before:])
    with psycopg.connect(dsn) as c:
        wrong = c.execute("""
            SELECT count(*) FROM portalq.job_queue q
            FULL JOIN portalq.job_search s ON s.job_id = q.id
            WHERE (q.payload ? 'legal_name') IS DISTINCT FROM (s.job_id IS NOT NULL)
               OR s.legal_name IS DISTINCT FROM q.payload ->> 'legal_name'""").fetchone()[0]   # type: ignore[index]
    print(f"{n:,} jobs: migration to head {took:.1f} s; the writer's statements meanwhile "
          f"and 1 s after: {len(during)}, longest wait {during[-1]:.2f} s, p99 "
          f"{during[int(0.99 * (len(during) - 1))]:.3f} s, median "
          f"{statistics.median(during) * 1000:.1f} ms; job_search rows wrong or missing: "
          f"{wrong}")
    if wrong:
        sys.exit(1)


if __name__ == "__main__":
    main()

"""What the job status trigger costs a claim's event, before and after migration 0034's
early return (issue 48 #22, issue 49.2).

    python bench/status_trigger_cost.py      # against the server on $PGPORT (55434)

Two databases of its own, one migrated to 0033, one to the head. On one connection each
(a pooled session: the trigger's plans cached), the claim's event statement -- a
``running`` row into ``job_events`` -- under EXPLAIN ANALYZE, alternated between the two,
``ROUNDS`` times after 20 warm-ups; medians of the trigger's time and the statement's.
"""

from __future__ import annotations

import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import common  # noqa: E402
import psycopg  # noqa: E402

from portalq.jobs.db import migrate  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "200"))
EVENT = ("EXPLAIN (ANALYZE) INSERT INTO portalq.job_events (job_id, at, attempt, "
         "from_status, to_status, worker) VALUES (%s, now(), 1, 'pending', 'running', 'w')")


def main() -> None:
    arms = {"0033 (before)": ("trigger_cost_0033", "0033"),
            "head (0034)": ("trigger_cost_head", "head")}
    conns, jobs, times = {}, {}, {}
    for arm, (db, revision) in arms.items():
        common.admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        common.admin(f"CREATE DATABASE {db}")
        migrate.upgrade(common.dsn(db), revision)
        conns[arm] = psycopg.connect(common.dsn(db), autocommit=True)
        jobs[arm] = conns[arm].execute(
            "INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, "
            "run_at, created_at, updated_at) VALUES ('file_entity', 'O', 'delaware_icis', "
            "'{}', 'running', now(), now(), now()) RETURNING id").fetchone()[0]  # type: ignore[index]
        times[arm] = []
    for i in range(ROUNDS + 20):
        for arm, conn in conns.items():
            plan = "\n".join(r[0] for r in conn.execute(EVENT, (jobs[arm],)))  # type: ignore[arg-type]
            trigger = re.search(r"Trigger job_events_status_notify: time=([\d.]+)", plan)
            total = re.search(r"Execution Time: ([\d.]+)", plan)
            if i >= 20 and trigger and total:
                times[arm].append((float(trigger.group(1)), float(total.group(1))))
    print(f"a claim's event statement, ms (medians of {ROUNDS}, load average "
          f"{os.getloadavg()[0]:.1f}):")
    for arm, xs in times.items():
        print(f"  {arm:14s} trigger {statistics.median(t for t, _ in xs):.3f}  "
              f"statement {statistics.median(s for _, s in xs):.3f}")
    for conn in conns.values():
        conn.close()


if __name__ == "__main__":
    main()

"""Autovacuum for a queue that churns beside a long history (issue 19, bench/scale_bench.py).

``job_queue`` holds a few hot rows (waiting and running jobs, each updated twice and
deleted by the prune) beside millions of finished ones kept for the retention period.
PostgreSQL's defaults vacuum a table after 20 % of it is dead: with 10 M finished jobs
that is 2 M dead row versions, left in the heap and in every index the claim and the tick
walk, for tens of minutes of churn. Vacuum is then throttled (2 ms sleeps per 200 pages of
cost), so a vacuum of the table's indexes takes minutes, during which more piles up.

* ``job_queue``: vacuum after 1 % + 1,000 dead rows and analyze after 2 % + 500 changed
  ones (the share of due jobs the claim's plan depends on moves quickly), unthrottled
  (``autovacuum_vacuum_cost_delay = 0``): the same settings PGQueuer applies to its queue
  table (``pgq autovac``).
* ``job_events``: append-only except for the prune's deletes; vacuumed after 2 % dead, so
  the space the prune frees is reused and the table stops growing once retention is
  reached.

No fillfactor: no status change can be a HOT update (``status`` is in the predicate of
the claim, waiting, running, failed and finished indexes, and ``heartbeat_at`` and
``started_at`` are indexed too), so free space kept in each page would only make the
table larger. The soak's ``n_tup_hot_upd`` shows it (the history of
docs/benchmarks-scale-log.md).

Revision ID: 0013
Revises: 0011
"""
from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0011"
branch_labels = None
depends_on = None

SETTINGS = {
    "job_queue": {"autovacuum_vacuum_scale_factor": "0.01",
                  "autovacuum_vacuum_threshold": "1000",
                  "autovacuum_analyze_scale_factor": "0.02",
                  "autovacuum_analyze_threshold": "500",
                  "autovacuum_vacuum_cost_delay": "0"},
    "job_events": {"autovacuum_vacuum_scale_factor": "0.02",
                   "autovacuum_vacuum_threshold": "1000"},
}


def upgrade() -> None:
    for table, opts in SETTINGS.items():
        op.execute(f"ALTER TABLE {table} SET ("
                   + ", ".join(f"{k} = {v}" for k, v in opts.items()) + ")")


def downgrade() -> None:
    for table, opts in SETTINGS.items():
        op.execute(f"ALTER TABLE {table} RESET (" + ", ".join(opts) + ")")

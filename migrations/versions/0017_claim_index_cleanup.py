"""Vacuum always cleans job_queue's indexes (issue 19: the claim slowed down with history).

Since PostgreSQL 14 a vacuum skips its index pass when the dead row versions sit on fewer
than 2 % of the table's pages (``vacuum_index_cleanup = auto``). In ``job_queue`` they always
do once the history is large: the churn is the few thousand waiting and running jobs, at
the end of a table of millions of finished ones. So the claim index (the waiting jobs only,
a few hundred pages) kept the entries of every job claimed since the table was last
vacuumed with its indexes, and every claim read them: with 10 M finished jobs the claim
touched 307 buffers after the first drain of 20,000 jobs and 1,312 after the fifth
(bench/scale_bench.py history; the third pass in the history of docs/benchmarks-scale-log.md;
the other half of that slowdown was the claim's plan, fixed in the claim statement itself).
With the index pass
always on, the claim stays at ~330 buffers however often it runs; the price is that each
vacuum of ``job_queue`` reads all its indexes (about 1 GB at 10 M finished jobs, a second
or two, once per 1 % of churn under migration 0013's settings).

Revision ID: 0017
Revises: 0016
"""
from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE job_queue SET (vacuum_index_cleanup = on)")


def downgrade() -> None:
    op.execute("ALTER TABLE job_queue RESET (vacuum_index_cleanup)")

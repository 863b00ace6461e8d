"""The registries' decisions read by an index on the jobs that recorded one (issue 48, the
ETA).

The ETA learns each registry's processing from the decisions its flows recorded
(``checkpoint->'decided'``). The read took the newest 5,000 ended jobs and looked for
decisions among them, so a day of deliveries and checks ending after the filings pushed
every decision out of the sample and the ETA went back to the declared times.
``job_queue_decided`` holds only the ended jobs that recorded a decision, by
``finished_at``: the read takes the newest of those, bounded, whatever else ended since.

Revision ID: 0030
Revises: 0029
"""
from __future__ import annotations

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # IF NOT EXISTS: a DBA with a large queue may build it CONCURRENTLY first
    op.execute("CREATE INDEX IF NOT EXISTS job_queue_decided ON job_queue (finished_at) "
               "WHERE status IN ('completed', 'cancelled', 'failed') "
               "AND checkpoint ? 'decided'")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS job_queue_decided")

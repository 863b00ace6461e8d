"""Lean enqueue: the job row is its own creation record; idempotency keys indexed only
where set.

* The ``enqueued`` event row is no longer written: it held nothing the job row lacks
  (its time is ``created_at``, a new job is always ``pending``), and it doubled the rows
  and index entries written per enqueue. ``jobs show`` derives it from the job row
  (``job_events`` in jobs/db/sql/queries.sql). Existing ones are deleted, so none shows twice.
* The unique constraint on ``idempotency_key`` becomes a partial unique index
  (``WHERE idempotency_key IS NOT NULL``): most jobs have no key, and each of them cost
  an entry in that index.

Revision ID: 0004
Revises: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""DELETE FROM job_events
                  WHERE from_status IS NULL AND attempt = 0
                    AND detail->>'event' = 'enqueued'""")
    op.drop_constraint("job_queue_idempotency_key", "job_queue", type_="unique")
    op.create_index("job_queue_idempotency_key", "job_queue", ["idempotency_key"], unique=True,
                    postgresql_where=sa.text("idempotency_key IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("job_queue_idempotency_key", table_name="job_queue",
                  postgresql_where=sa.text("idempotency_key IS NOT NULL"))
    op.create_unique_constraint("job_queue_idempotency_key", "job_queue", ["idempotency_key"])
    op.execute("""INSERT INTO job_events (job_id, at, attempt, from_status, to_status, detail)
                  SELECT id, created_at, 0, NULL, 'pending', '{"event": "enqueued"}'::jsonb
                  FROM job_queue ORDER BY id""")

"""Secrets at rest: sealed secret payload fields, erasure, encrypted documents.

``job_queue.secret_*`` hold a job's secret payload fields (SSNs, ITINs...) sealed with a
per-job data key wrapped by a key-encryption key kept outside the database (see
jobs/secrets/crypto.py); the payload itself keeps only a marker. They are set to NULL (erased) when
the job completes or is cancelled, and for failed jobs after a retention period.
``job_documents.key_id`` names the KEK of a sealed document.

Revision ID: 0012
Revises: 0009
"""
from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        ALTER TABLE job_queue ADD COLUMN secret_key_id text, ADD COLUMN secret_dek bytea,
            ADD COLUMN secret_data bytea, ADD COLUMN secrets_erased_at timestamptz""")
    op.execute("ALTER TABLE job_documents ADD COLUMN key_id text")
    op.execute("CREATE INDEX job_queue_failed ON job_queue (finished_at) "
               "WHERE status = 'failed'")


def downgrade() -> None:
    op.execute("DROP INDEX job_queue_failed")
    op.execute("ALTER TABLE job_documents DROP COLUMN key_id")
    op.execute("""
        ALTER TABLE job_queue DROP COLUMN secret_key_id, DROP COLUMN secret_dek,
            DROP COLUMN secret_data, DROP COLUMN secrets_erased_at""")

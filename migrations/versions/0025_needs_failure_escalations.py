"""``escalations_failure_latest``: a failed job's latest failure escalation (the "Needs you"
page's groups, its uncertain filings and the navigation's count read it once per failed
job) is the first entry of this index for the job, read from the index alone -- no
escalations of the job read and sorted each time (issue 39).

Revision ID: 0025
Revises: 0024
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("escalations_failure_latest", "escalations",
                    ["job_id", sa.text("id DESC")], postgresql_include=["kind"],
                    postgresql_where=sa.text("kind NOT IN ('question', 'approval')"))


def downgrade() -> None:
    op.drop_index("escalations_failure_latest", table_name="escalations")

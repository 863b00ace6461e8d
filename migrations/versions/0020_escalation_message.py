"""The escalation mail as it was sent (issue 39): ``escalations.message`` keeps the
rendered message (RFC 5322 bytes, scrubbed of the job's secrets), written in the same
transaction that marks the row sent, so the console shows the mail itself -- its
recipients, subject, text and link -- rather than a copy rebuilt from the record.
``escalations_approval``: the console's inbox reads the approval escalations (few) without
reading every escalation ever raised.

Revision ID: 0020
Revises: 0019
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("escalations", sa.Column("message", sa.LargeBinary(), nullable=True))
    op.create_index("escalations_approval", "escalations", ["job_id"],
                    postgresql_where=sa.text("kind = 'approval'"))


def downgrade() -> None:
    op.drop_index("escalations_approval", table_name="escalations")
    op.drop_column("escalations", "message")

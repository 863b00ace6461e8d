"""A page a flow does not know holds that flow's job type, not its whole portal (issue 52).

- ``portals.drift_pauses``: the portal's job types held for a changed page, each with when
  and why (``{"<job_type>": {"at": "...", "reason": "..."}}``). A claim skips their jobs
  until an operator resumes the portal; the portal's other job types are still claimed (a
  BC name search is not stopped by a changed incorporation page). A portal paused for a
  changed page before this migration (``paused_by = 'drift'``) stays paused as it was.

Revision ID: 0031
Revises: 0030
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("portals", sa.Column("drift_pauses", JSONB(), nullable=False,
                                       server_default=sa.text("'{}'::jsonb")))


def downgrade() -> None:
    op.drop_column("portals", "drift_pauses")

"""Per-portal circuit breaker: outage streak, pause/probe state, portal notices.

Revision ID: 0003
Revises: 0002
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("portals", sa.Column("paused_by", sa.Text(), nullable=True))
    op.add_column("portals", sa.Column("probe_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("portals", sa.Column("outage_streak", sa.Integer(),
                                       server_default=sa.text("0"), nullable=False))
    op.add_column("portals", sa.Column("outage_last_job", sa.BigInteger(), nullable=True))
    op.create_table(
        "portal_notices",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("portal", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("send_attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("next_try_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_send_error", sa.Text(), nullable=True),
        sa.CheckConstraint("kind IN ('paused','resumed')", name="portal_notices_kind"),
        sa.ForeignKeyConstraint(["portal"], ["portals.code"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("portal_notices_unsent", "portal_notices", ["next_try_at"], unique=False,
                    postgresql_where=sa.text("sent_at IS NULL"))


def downgrade() -> None:
    op.drop_index("portal_notices_unsent", table_name="portal_notices",
                  postgresql_where=sa.text("sent_at IS NULL"))
    op.drop_table("portal_notices")
    op.drop_column("portals", "outage_last_job")
    op.drop_column("portals", "outage_streak")
    op.drop_column("portals", "probe_at")
    op.drop_column("portals", "paused_by")

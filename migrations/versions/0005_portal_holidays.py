"""Holidays stored per portal: the service reads them from the database instead of
computing them with the `holidays` package, which imports every country (~8 MiB in each
worker process). Schema only: `portalq migrate` stores them right after the migrations
(last year .. five years ahead), and the maintenance tick stores whatever is missing
(scheduler.calendar_cache.refresh_holidays).

Revision ID: 0005
Revises: 0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("portals", sa.Column("holidays_region", sa.Text(), nullable=True))
    op.add_column("portals", sa.Column("holidays_from", sa.SmallInteger(), nullable=True))
    op.add_column("portals", sa.Column("holidays_to", sa.SmallInteger(), nullable=True))
    op.create_table(
        "portal_holidays",
        sa.Column("portal", sa.Text(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["portal"], ["portals.code"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("portal", "day"),
    )


def downgrade() -> None:
    op.drop_table("portal_holidays")
    op.drop_column("portals", "holidays_to")
    op.drop_column("portals", "holidays_from")
    op.drop_column("portals", "holidays_region")

"""Orders as pipelines (issue 41): ``orders`` (one row per order of a declared kind, its
input sealed until no step waits for it) and ``order_steps`` (each step's job, the steps it
comes after, whether it is held). A held step is a ``deferred`` job whose ``run_at`` is
jobs.business.order_runs.HELD_UNTIL: the claim's index range (run_at <= now) never reaches it, so
the claim is unchanged.

Revision ID: 0023
Revises: 0022
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "orders",
        sa.Column("order_id", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("input_key_id", sa.Text),
        sa.Column("input_data", sa.LargeBinary),
        sa.Column("input_erased_at", TZ),
        sa.Column("cancelled_at", TZ),
        sa.Column("cancel_reason", sa.Text),
    )
    op.create_table(
        "order_steps",
        sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("step", sa.Text, nullable=False),
        sa.Column("job_id", sa.BigInteger, nullable=False),
        sa.Column("after", sa.ARRAY(sa.Text), nullable=False),
        sa.Column("held", sa.Boolean, nullable=False),
        sa.PrimaryKeyConstraint("order_id", "step", name="order_steps_pkey"),
        sa.UniqueConstraint("job_id", name="order_steps_job"),
    )
    op.create_index("order_steps_held", "order_steps", ["order_id"],
                    postgresql_where=sa.text("held"))


def downgrade() -> None:
    op.drop_table("order_steps")
    op.drop_table("orders")

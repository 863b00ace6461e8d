"""Faults (issue 12): crash counts, probe limits, outage signs over a window, outbox wake-ups.

- ``job_queue.crashes``: rescues after a worker died; each refunds the attempt up to the
  crash limit (a crash is not the job's fault). ``job_queue.probe_failures``: failed runs
  as a paused portal's probe (refunded, up to the probe limit).
- ``portal_outage_signs``: one row per job that showed an outage sign on a portal, with
  when; the breaker counts distinct jobs within a window (A, B, A is two jobs, not three).
- ``job_artifacts.note``: why a piece of evidence is missing (kind ``missing``).
- A statement trigger on ``escalations`` and ``portal_notices`` NOTIFYs ``portalq_outbox``
  so a failed job's mail leaves at once, not at the next tick.

Revision ID: 0009
Revises: 0008
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_queue", sa.Column("crashes", sa.SmallInteger(),
                                         server_default=sa.text("0"), nullable=False))
    op.add_column("job_queue", sa.Column("probe_failures", sa.SmallInteger(),
                                         server_default=sa.text("0"), nullable=False))
    # evidence that could not be made (kind 'missing'): what and why, never an outcome
    op.add_column("job_artifacts", sa.Column("note", sa.Text(), nullable=True))
    op.create_table(
        "portal_outage_signs",
        sa.Column("portal", sa.Text(), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("portal", "job_id"),
    )
    op.execute("""
        CREATE FUNCTION portalq_outbox_notify() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('portalq_outbox', TG_TABLE_NAME);
            RETURN NULL;
        END $$""")
    for table in ("escalations", "portal_notices"):
        op.execute(f"""
            CREATE TRIGGER {table}_outbox_notify AFTER INSERT ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION portalq_outbox_notify()""")


def downgrade() -> None:
    for table in ("escalations", "portal_notices"):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_outbox_notify ON {table}")
    op.execute("DROP FUNCTION IF EXISTS portalq_outbox_notify()")
    op.drop_table("portal_outage_signs")
    op.drop_column("job_artifacts", "note")
    op.drop_column("job_queue", "probe_failures")
    op.drop_column("job_queue", "crashes")

"""The outbox is NOTIFYed only when an outbox row is written (issue 19).

Migration 0009's triggers on ``escalations`` and ``portal_notices`` ran once per INSERT
statement, and a statement trigger runs even when the statement inserts nothing. Every
completion batch carries such an INSERT (a portal notice, written when a success resumes a
portal the breaker paused: almost never), so every batch NOTIFYed ``portalq_outbox``: each
node's listener woke, the leader read the outbox (two statements) for nothing, and every
completion's commit took PostgreSQL's notification-queue lock, which orders the commits of
all notifying transactions one after another (enqueues NOTIFY too). The triggers now see
the statement's inserted rows (a transition table) and notify only when there are any.

Revision ID: 0018
Revises: 0017
"""
from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

TABLES = ("escalations", "portal_notices")
ONLY_WITH_ROWS = "IF EXISTS (SELECT 1 FROM inserted) THEN {} END IF;"


def _triggers(*, only_with_rows: bool) -> None:
    notify = "PERFORM pg_notify('portalq_outbox', TG_TABLE_NAME);"
    op.execute(f"""
        CREATE OR REPLACE FUNCTION portalq_outbox_notify() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            {ONLY_WITH_ROWS.format(notify) if only_with_rows else notify}
            RETURN NULL;
        END $$""")
    for table in TABLES:
        op.execute(f"DROP TRIGGER {table}_outbox_notify ON {table}")
        op.execute(f"""
            CREATE TRIGGER {table}_outbox_notify AFTER INSERT ON {table}
            {"REFERENCING NEW TABLE AS inserted" if only_with_rows else ""}
            FOR EACH STATEMENT EXECUTE FUNCTION portalq_outbox_notify()""")


def upgrade() -> None:
    _triggers(only_with_rows=True)


def downgrade() -> None:
    _triggers(only_with_rows=False)

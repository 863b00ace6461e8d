"""Portals are never deleted or renamed: a retired portal is disabled (enabled = false).

Jobs and their history name their portal by code (no foreign key: one would lock the
portal's row on every enqueue). A deleted or renamed portal would leave its jobs waiting
forever for a portal that no longer exists. It also lets `jobs.queue` remember, per
connection, the portals it has seen exist, and skip that check on later enqueues.

Revision ID: 0008
Revises: 0007
"""
from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE FUNCTION portalq_portals_kept() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'portals are never deleted or renamed (jobs refer to them by '
                            'code): disable one with enabled = false'
                USING ERRCODE = 'restrict_violation';
        END $$""")
    op.execute("""
        CREATE TRIGGER portals_kept BEFORE DELETE OR UPDATE OF code ON portals
        FOR EACH ROW EXECUTE FUNCTION portalq_portals_kept()""")
    op.execute("""
        CREATE TRIGGER portals_kept_truncate BEFORE TRUNCATE ON portals
        FOR EACH STATEMENT EXECUTE FUNCTION portalq_portals_kept()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS portals_kept_truncate ON portals")
    op.execute("DROP TRIGGER IF EXISTS portals_kept ON portals")
    op.execute("DROP FUNCTION IF EXISTS portalq_portals_kept()")

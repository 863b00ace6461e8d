"""portalq in a schema of its own: its functions find their tables whoever calls them.

The tables, sequences, functions and the version table are created in (or, for an
installation made before this revision, moved into) portalq's schema by the environment
(``migrations/env.py``, :mod:`portalq.jobs.db.schema_move`), before any revision runs. The
functions' bodies name tables unqualified; they run in the caller's transaction, and the
caller may be the business's application (the enqueue trigger) with a search path of its
own, so each function carries its search path: PostgreSQL's catalog, then the schema.
A function added after this revision sets its own (see docs/howto/deployment.md, "In the
business's own database").

Revision ID: 0019
Revises: 0018
"""
from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_EACH_FUNCTION = """
DO $pin$
DECLARE r record;
BEGIN
    FOR r IN SELECT p.oid::regprocedure AS f FROM pg_proc p
             WHERE p.pronamespace = current_schema()::regnamespace
               AND p.proname LIKE 'portalq\\_%' LOOP
        EXECUTE {action};
    END LOOP;
END $pin$"""


def upgrade() -> None:
    op.execute(_EACH_FUNCTION.format(action="format('ALTER FUNCTION %s SET search_path = "
                                            "pg_catalog, %I', r.f, current_schema())"))


def downgrade() -> None:
    op.execute(_EACH_FUNCTION.format(
        action="format('ALTER FUNCTION %s RESET search_path', r.f)"))

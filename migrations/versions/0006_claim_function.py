"""One-statement claims: the running count of a session-limited portal is taken by a
VOLATILE function after it holds the portal's claim lock.

A claim used to be BEGIN; lock the limited portals; claim; COMMIT (four round trips), so
that the count of running jobs was read after the lock (a statement's snapshot starts
when the statement does). A VOLATILE function takes a fresh snapshot for each query it
runs, so it can lock first and count after, inside the claim statement itself; the claim
then runs as one autocommit statement. The lock is held to the statement's commit, as
before to the transaction's.

Revision ID: 0006
Revises: 0005
"""
from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # 726201 is jobs.kinds.LockKey.CLAIM_PORTAL (a migration's text stays as it shipped;
    # tests/unit/test_names.py checks the two agree)
    op.execute("""
        CREATE FUNCTION portalq_running_locked(p text) RETURNS int
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE n int;
        BEGIN
            -- serialises claims of this portal across nodes until the claim commits
            PERFORM pg_advisory_xact_lock(726201, hashtext(p));
            -- a fresh snapshot (VOLATILE, READ COMMITTED): sees claims committed meanwhile
            SELECT count(*) INTO n FROM job_queue WHERE status = 'running' AND portal = p;
            RETURN n;
        END $$""")


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS portalq_running_locked(text)")

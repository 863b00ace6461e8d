"""Portal accounts: who signs in where (issue 16); questions a flow asks a person. Secrets are never stored here: a
password or TOTP seed comes from the secrets provider (jobs/secrets/account_secrets.py); a reused
browser session (Playwright storage state) is sealed at rest like the payloads' secrets.

Revision ID: 0015
Revises: 0014
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "portal_accounts",
        sa.Column("portal", sa.Text, sa.ForeignKey("portals.code"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("paused_at", TZ),
        sa.Column("pause_reason", sa.Text),
        sa.Column("paused_by", sa.Text),
        # one signed-in session at a time per account, across every node: its holder
        sa.Column("in_use_by", sa.Text),
        sa.Column("in_use_until", TZ),
        sa.Column("last_used_at", TZ),
        sa.Column("password_expires_on", sa.Date),
        # sealed (jobs/secrets/crypto.py) Playwright storage state, dropped when the portal ends it
        sa.Column("session_state", sa.LargeBinary),
        sa.Column("session_key_id", sa.Text),
        sa.Column("created_at", TZ, nullable=False, server_default=sa.text("now()")),
        sa.PrimaryKeyConstraint("portal", "name"),
        sa.CheckConstraint("name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'", name="portal_accounts_name"),
    )


    # a flow asking a person mid-flow (an e-mailed code, a CAPTCHA): the job waits visibly
    op.create_table(
        "job_questions",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("job_id", sa.BigInteger, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("asked_at", TZ, nullable=False),
        sa.Column("deadline", TZ, nullable=False),
        # sealed (jobs/secrets/crypto.py), erased once the flow has read it
        sa.Column("answer", sa.LargeBinary),
        sa.Column("answer_key_id", sa.Text),
        sa.Column("answered_at", TZ),
        sa.Column("answered_by", sa.Text),
        sa.Column("read_at", TZ),
    )
    op.create_index("job_questions_job", "job_questions", ["job_id", "id"])
    # "your password expires in N days": told to admins days ahead, once a day per account
    op.drop_constraint("portal_notices_kind", "portal_notices")
    op.create_check_constraint("portal_notices_kind", "portal_notices",
                               "kind IN ('paused','resumed','password_expiring')")


def downgrade() -> None:
    op.execute("DELETE FROM portal_notices WHERE kind = 'password_expiring'")
    op.drop_constraint("portal_notices_kind", "portal_notices")
    op.create_check_constraint("portal_notices_kind", "portal_notices",
                               "kind IN ('paused','resumed')")
    op.drop_index("job_questions_job", table_name="job_questions")
    op.drop_table("job_questions")
    op.drop_table("portal_accounts")

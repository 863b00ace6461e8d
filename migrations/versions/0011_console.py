"""The admin console: users, sessions, sign-in failures, the audit log, escalation
handling; partial indexes for the console's job list (failed / waiting jobs by id).

Revision ID: 0011
Revises: 0012
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0012"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "console_users",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("password_changed_at", TZ, nullable=False),
        sa.Column("disabled_at", TZ),
        sa.CheckConstraint("role IN ('viewer','operator','admin')", name="console_users_role"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "console_sessions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("last_seen_at", TZ, nullable=False),
        sa.Column("ended_at", TZ),
        sa.ForeignKeyConstraint(["user_id"], ["console_users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index("console_sessions_user", "console_sessions", ["user_id"])
    op.create_table(
        "console_login_failures",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("ip", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("console_login_failures_name", "console_login_failures", ["name", "at"])
    op.create_index("console_login_failures_ip", "console_login_failures", ["ip", "at"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("role", sa.Text()),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("before", sa.dialects.postgresql.JSONB()),
        sa.Column("after", sa.dialects.postgresql.JSONB()),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("audit_log_target", "audit_log", ["target", "id"])
    op.create_table(
        "escalation_handling",
        sa.Column("escalation_id", sa.BigInteger(), nullable=False),
        sa.Column("acknowledged_at", TZ),
        sa.Column("acknowledged_by", sa.Text()),
        sa.Column("assigned_to", sa.Text()),
        sa.Column("resolved_at", TZ),
        sa.Column("resolved_by", sa.Text()),
        sa.Column("updated_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(["escalation_id"], ["escalations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("escalation_id"),
    )
    # INCLUDE: the overview's depth by portal (and status) and its failures per hour are
    # counted from the index alone
    op.create_index("job_queue_failed_id", "job_queue", ["id"],
                    postgresql_include=["portal", "finished_at"],
                    postgresql_where=sa.text("status = 'failed'"))
    op.create_index("job_queue_waiting_id", "job_queue", ["id"],
                    postgresql_include=["portal", "status"],
                    postgresql_where=sa.text("status IN ('pending','deferred')"))


def downgrade() -> None:
    op.drop_index("job_queue_waiting_id", table_name="job_queue")
    op.drop_index("job_queue_failed_id", table_name="job_queue")
    op.drop_table("escalation_handling")
    op.drop_index("audit_log_target", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_table("console_login_failures")
    op.drop_index("console_sessions_user", table_name="console_sessions")
    op.drop_table("console_sessions")
    op.drop_table("console_users")

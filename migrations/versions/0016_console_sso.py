"""Console single sign-on (OpenID Connect): the identities that sign in through the
company's provider, each linked to one console user (whose role the provider's claims set
at every sign-in); such a user has no password.

Revision ID: 0016
Revises: 0015
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.alter_column("console_users", "password_hash", nullable=True)
    op.create_table(
        "console_sso_identities",
        sa.Column("issuer", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("last_sign_in_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["console_users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("issuer", "subject"),
        sa.UniqueConstraint("user_id", name="console_sso_identities_user"),
    )


def downgrade() -> None:
    op.drop_table("console_sso_identities")
    # users made by sign-on have no password: they cannot exist without it
    op.execute("DELETE FROM console_users WHERE password_hash IS NULL")
    op.alter_column("console_users", "password_hash", nullable=False)

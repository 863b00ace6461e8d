"""Escalation mail threads and Message-IDs no other database repeats (issue 48 items 7, 8).

- ``escalations.mail_token``, ``portal_notices.mail_token``: a random part of the row's
  Message-ID (``<escalation-ID.TOKEN@portalq>``). Ids alone repeat in every new database: a
  demo rerun, a restore, staging and production sharing an inbox all sent the same
  Message-IDs, and mail clients dropped or mis-threaded the later mails. Drawn once per row
  (the resend of one row after a crash keeps its Message-ID); the rows mailed before this
  migration keep none, so their Message-ID stays the one they were sent with.
- ``escalations.mail_thread``: the escalation whose mail started the thread this one went
  in, for escalations with a cause shared by others (one portal, kind and reason): while a
  cause keeps recurring, its later jobs are mailed as replies in that thread.
- ``escalations_threads``: the recent threads of a portal's kind, read by the mailer.

Revision ID: 0029
Revises: 0028
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

TOKEN = sa.text("replace(gen_random_uuid()::text, '-', '')")


def upgrade() -> None:
    for table in ("escalations", "portal_notices"):
        # added without a default first: the rows already mailed keep no token
        op.add_column(table, sa.Column("mail_token", sa.Text()))
        op.alter_column(table, "mail_token", server_default=TOKEN)
    op.add_column("escalations", sa.Column("mail_thread", sa.BigInteger()))
    op.create_index("escalations_threads", "escalations", ["kind", "created_at"],
                    postgresql_where=sa.text("mail_thread IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("escalations_threads", table_name="escalations")
    op.drop_column("escalations", "mail_thread")
    for table in ("escalations", "portal_notices"):
        op.drop_column(table, "mail_token")

"""Webhooks back off per subscription, and no transaction is held across an attempt
(issue 48).

- ``webhook_subscriptions.retry_at``: the endpoint's backoff. After a failed attempt no
  delivery of the subscription is tried before it, the new ones included (each delivery was
  due at its creation: an outage of 30 s made 15 failures and paused the subscription).
  A paused subscription keeps it too: it is probed at the last backoff step and active again
  when its endpoint answers.
- ``webhook_subscriptions.busy_until``: an attempt is out (its delivery leased by a sender
  until then; the HTTP call runs outside any transaction). A sender that dies mid-attempt
  leaves the lease to expire: the delivery is then sent again (at least once).

Revision ID: 0027
Revises: 0026
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("webhook_subscriptions", sa.Column("retry_at", TS, nullable=True))
    op.add_column("webhook_subscriptions", sa.Column("busy_until", TS, nullable=True))
    # a subscription failing now keeps the backoff its deliveries had
    op.execute("""
        UPDATE webhook_subscriptions w SET retry_at = (
            SELECT max(d.next_try_at) FROM webhook_deliveries d
            WHERE d.subscription_id = w.id AND d.delivered_at IS NULL)
        WHERE w.failures > 0""")


def downgrade() -> None:
    op.drop_column("webhook_subscriptions", "busy_until")
    op.drop_column("webhook_subscriptions", "retry_at")

"""Webhooks (issue 36): the app's endpoints told of its jobs' results, signed, durable.

- ``webhook_subscriptions``: an endpoint, the event kinds it wants, its signing secret
  (``whsec_...``, sealed at rest like a job's secrets) and its health: consecutive failed
  attempts, and when it was paused for them (and when the admins were told of that, once).
- ``webhook_deliveries``: one row per event per subscription, written by the trigger of
  migration ``0021`` in the transaction that decided the job (so none is lost
  and none is made up by a rollback). Its ``msg_id`` is the ``webhook-id`` of every attempt;
  its body is built once, at the first attempt, and sent unchanged on every retry.
- ``webhook_attempts``: the delivery log, one row per HTTP attempt. Delivered deliveries
  and their log are deleted after ``jobs.business.webhooks.KEEP`` (the sender prunes them hourly).

The statement triggers of ``0021`` now also write the deliveries, and
NOTIFY ``portalq_outbox`` (the leader's sender wakes) only when they wrote any: with no
subscription, a completion batch costs one empty join more.

Revision ID: 0022
Revises: 0021
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

CHANNEL = "portalq_job_status"
CHUNK = 16
DECIDED = "'completed', 'failed', 'cancelled'"
PERSON_KINDS = "'question', 'approval'"
TS = sa.DateTime(timezone=True)


def _function(name: str, source: str, *, deliveries: bool) -> None:
    """The statement trigger function of ``0021``; with ``deliveries`` it
    also writes one webhook delivery per subscription that wants each event."""
    write = f"""
            WITH d AS (
                INSERT INTO webhook_deliveries (subscription_id, job_id, event, created_at,
                                                next_try_at)
                SELECT w.id, s.job_id, s.status, s.at, s.at
                FROM ({source}) s JOIN webhook_subscriptions w ON s.status = ANY (w.events)
                RETURNING 1)
            SELECT count(*) INTO written FROM d;
            IF written > 0 THEN
                PERFORM pg_notify('portalq_outbox', 'webhook_deliveries');
            END IF;""" if deliveries else ""
    op.execute(f"""
        CREATE OR REPLACE FUNCTION {name}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        DECLARE msg text; written int;
        BEGIN
            FOR msg IN
                SELECT json_agg(json_build_object('id', s.job_id, 'order_id', j.order_id,
                                                  'type', j.job_type, 'status', s.status)
                                ORDER BY s.job_id)::text
                FROM (SELECT job_id, status,
                             (row_number() OVER (ORDER BY job_id) - 1) / {CHUNK} AS chunk
                      FROM ({source}) src) s
                JOIN job_queue j ON j.id = s.job_id
                GROUP BY s.chunk
            LOOP
                PERFORM pg_notify('{CHANNEL}', msg);
            END LOOP;{write}
            RETURN NULL;
        END $$""")
    op.execute(f"""
        DO $pin$ BEGIN
            EXECUTE format('ALTER FUNCTION {name}() SET search_path = pg_catalog, %I',
                           current_schema());
        END $pin$""")


def _functions(*, deliveries: bool) -> None:
    _function("portalq_job_status_notify",
              f"SELECT job_id, to_status AS status, at FROM inserted "
              f"WHERE to_status IN ({DECIDED})", deliveries=deliveries)
    _function("portalq_job_waiting_notify",
              f"SELECT job_id, 'waiting_for_person'::text AS status, min(created_at) AS at "
              f"FROM inserted WHERE kind IN ({PERSON_KINDS}) GROUP BY job_id",
              deliveries=deliveries)


def upgrade() -> None:
    op.create_table(
        "webhook_subscriptions",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.ARRAY(sa.Text()), nullable=False),
        sa.Column("key_id", sa.Text(), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("paused_at", TS, nullable=True),
        sa.Column("pause_reason", sa.Text(), nullable=True),
        sa.Column("pause_told_at", TS, nullable=True),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("msg_id", sa.Text(), nullable=False,
                  server_default=sa.text("'msg_' || replace(gen_random_uuid()::text, '-', '')")),
        sa.Column("subscription_id", sa.BigInteger(),
                  sa.ForeignKey("webhook_subscriptions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("next_try_at", TS, nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("delivered_at", TS, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.UniqueConstraint("msg_id", name="webhook_deliveries_msg_id"),
    )
    op.create_index("webhook_deliveries_due", "webhook_deliveries", ["next_try_at"],
                    postgresql_where=sa.text("delivered_at IS NULL"))
    op.create_index("webhook_deliveries_delivered", "webhook_deliveries", ["delivered_at"],
                    postgresql_where=sa.text("delivered_at IS NOT NULL"))
    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("delivery_id", sa.BigInteger(),
                  sa.ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("took_ms", sa.Integer(), nullable=False),
    )
    op.create_index("webhook_attempts_delivery", "webhook_attempts", ["delivery_id"])
    _functions(deliveries=True)


def downgrade() -> None:
    _functions(deliveries=False)
    op.drop_table("webhook_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_subscriptions")

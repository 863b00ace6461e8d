"""Results back to the app (issue 36): two more events, "waiting on the portal" and "decided".

- ``waiting_on_portal``: a job deferred to look again at a portal that has not decided yet
  (:mod:`jobs.waiting`): its deferral's ``detail.waiting_on`` names the portal. Told at
  the first such deferral of a wait (none since the checkpoint's ``waiting.since``, found by
  the ``job_events_job`` index), not at every re-check; and not lost when the first check
  saved its marker but its worker stopped before deferring (the count alone would miss it).
- ``decided``: a person decided for the job -- an approval ``approved`` or ``rejected``
  (the checkpoint's ``approval.state`` leaving ``pending``: a row trigger on that column
  only, so a claim, which does not write the checkpoint, never evaluates it), or an
  uncertain filing resolved ``filed`` (``admin confirmed filed``) or ``not_filed`` (the
  admin retry that patches the checkpoint's ``resolved``, :func:`jobs.queue.resolve_not_filed`).
  Its ``decision`` says which: in the NOTIFY element, and in a webhook delivery
  (``webhook_deliveries.decision``, new here) for its body.

The statement trigger function on ``job_events`` (migrations 0021/0022) is replaced by one
that also selects these rows; claims insert ``running`` rows, which none of its branches
selects, so they stay silent.

Revision ID: 0024
Revises: 0023
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

CHANNEL = "portalq_job_status"
CHUNK = 16

#: the job_events rows told: (job_id, status, decision, at)
EVENTS_SOURCE = """
    SELECT job_id, to_status AS status, NULL::text AS decision, at FROM inserted
    WHERE to_status IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT i.job_id, 'waiting_on_portal', NULL, i.at
    FROM inserted i JOIN job_queue q ON q.id = i.job_id
    WHERE i.to_status = 'deferred' AND i.detail ? 'waiting_on' AND q.checkpoint ? 'waiting'
      AND NOT EXISTS (SELECT 1 FROM job_events e
                      WHERE e.job_id = i.job_id AND e.id < i.id AND e.detail ? 'waiting_on'
                        AND e.at >= (q.checkpoint #>> '{waiting,since}')::timestamptz)
    UNION ALL
    SELECT job_id, 'decided',
           CASE WHEN detail->>'event' = 'admin confirmed filed' THEN 'filed'
                ELSE 'not_filed' END, at
    FROM inserted
    WHERE detail->>'event' = 'admin confirmed filed'
       OR (detail->>'event' = 'admin retry' AND detail->'checkpoint_changed' ? 'resolved')"""

OLD_SOURCE = """
    SELECT job_id, to_status AS status, at FROM inserted
    WHERE to_status IN ('completed', 'failed', 'cancelled')"""


def _pin(name: str) -> None:
    op.execute(f"""
        DO $pin$ BEGIN
            EXECUTE format('ALTER FUNCTION {name}() SET search_path = pg_catalog, %I',
                           current_schema());
        END $pin$""")


def _events_function(source: str, *, decision: bool) -> None:
    """Migration 0022's ``portalq_job_status_notify`` over ``source``; with ``decision``
    its elements and deliveries carry the decision (left out of an element without one)."""
    element = ("json_strip_nulls(json_build_object('id', s.job_id, 'order_id', j.order_id, "
               "'type', j.job_type, 'status', s.status, 'decision', s.decision))"
               if decision else
               "json_build_object('id', s.job_id, 'order_id', j.order_id, "
               "'type', j.job_type, 'status', s.status)")
    inner = "job_id, status, decision" if decision else "job_id, status"
    columns, values = (", decision", ", s.decision") if decision else ("", "")
    op.execute(f"""
        CREATE OR REPLACE FUNCTION portalq_job_status_notify() RETURNS trigger
        LANGUAGE plpgsql AS $$
        DECLARE msg text; written int;
        BEGIN
            FOR msg IN
                SELECT json_agg({element} ORDER BY s.job_id, s.status)::text
                FROM (SELECT {inner},
                             (row_number() OVER (ORDER BY job_id) - 1) / {CHUNK} AS chunk
                      FROM ({source}) src) s
                JOIN job_queue j ON j.id = s.job_id
                GROUP BY s.chunk
            LOOP
                PERFORM pg_notify('{CHANNEL}', msg);
            END LOOP;
            WITH d AS (
                INSERT INTO webhook_deliveries (subscription_id, job_id, event, created_at,
                                                next_try_at{columns})
                SELECT w.id, s.job_id, s.status, s.at, s.at{values}
                FROM ({source}) s JOIN webhook_subscriptions w ON s.status = ANY (w.events)
                RETURNING 1)
            SELECT count(*) INTO written FROM d;
            IF written > 0 THEN
                PERFORM pg_notify('portalq_outbox', 'webhook_deliveries');
            END IF;
            RETURN NULL;
        END $$""")
    _pin("portalq_job_status_notify")


def upgrade() -> None:
    op.add_column("webhook_deliveries", sa.Column("decision", sa.Text(), nullable=True))
    _events_function(EVENTS_SOURCE, decision=True)
    # an approval decided: one row at a time (an admin's action), told like the rest
    op.execute(f"""
        CREATE FUNCTION portalq_job_approval_notify() RETURNS trigger
        LANGUAGE plpgsql AS $$
        DECLARE decision text := NEW.checkpoint #>> '{{approval,state}}'; written int;
        BEGIN
            PERFORM pg_notify('{CHANNEL}', json_build_array(json_build_object(
                'id', NEW.id, 'order_id', NEW.order_id, 'type', NEW.job_type,
                'status', 'decided', 'decision', decision))::text);
            WITH d AS (
                INSERT INTO webhook_deliveries (subscription_id, job_id, event, created_at,
                                                next_try_at, decision)
                SELECT w.id, NEW.id, 'decided', NEW.updated_at, NEW.updated_at, decision
                FROM webhook_subscriptions w WHERE 'decided' = ANY (w.events)
                RETURNING 1)
            SELECT count(*) INTO written FROM d;
            IF written > 0 THEN
                PERFORM pg_notify('portalq_outbox', 'webhook_deliveries');
            END IF;
            RETURN NULL;
        END $$""")
    _pin("portalq_job_approval_notify")
    op.execute("""
        CREATE TRIGGER job_queue_approval_notify AFTER UPDATE OF checkpoint ON job_queue
        FOR EACH ROW
        WHEN (OLD.checkpoint #>> '{approval,state}' = 'pending'
              AND NEW.checkpoint #>> '{approval,state}' IN ('approved', 'rejected'))
        EXECUTE FUNCTION portalq_job_approval_notify()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER job_queue_approval_notify ON job_queue")
    op.execute("DROP FUNCTION portalq_job_approval_notify()")
    op.execute("DELETE FROM webhook_deliveries WHERE event IN ('waiting_on_portal', 'decided')")
    _events_function(OLD_SOURCE, decision=False)
    op.drop_column("webhook_deliveries", "decision")

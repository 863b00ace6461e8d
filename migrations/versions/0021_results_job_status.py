"""Results back to the app (issue 36): ``NOTIFY portalq_job_status`` when a job is decided.

The business's application LISTENs on ``portalq_job_status`` instead of polling the queue.
Each notification's payload is a JSON array of ``{"id", "order_id", "type", "status"}``,
one element per job the statement moved, at most :data:`CHUNK` jobs per notification (a
NOTIFY payload holds under 8000 bytes; an order id is at most 200 characters).

Only the statuses an application acts on are told: ``completed``, ``failed``, ``cancelled``
(from the job's own transition, ``job_events``) and ``waiting_for_person`` (a flow asking a
person a question or for an approval, ``escalations``). Claims, retries and deferrals are
not: they are the queue's business, and the claim is a hot path. Both triggers run once per
statement over its inserted rows (a transition table, as migration 0018's), so a completion
batch of fifty jobs sends one notification, and a claim none. Every notifying transaction
takes PostgreSQL's notification-queue lock at commit (migration 0018's note); completions
now do, by design, once per batch.

The functions carry their search path (migration 0019): they run in the caller's
transaction, whatever its own search path.

Revision ID: 0021
Revises: 0020
"""
from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

CHANNEL = "portalq_job_status"
#: jobs per notification: 16 x (200-character order id + type + the rest) < 8000 bytes
CHUNK = 16
DECIDED = ("completed", "failed", "cancelled")
PERSON_KINDS = ("question", "approval")


def _function(name: str, source: str) -> None:
    """A statement trigger function that NOTIFYs the rows ``source`` selects, in chunks."""
    op.execute(f"""
        CREATE OR REPLACE FUNCTION {name}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        DECLARE msg text;
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
            END LOOP;
            RETURN NULL;
        END $$""")
    op.execute(f"""
        DO $pin$ BEGIN
            EXECUTE format('ALTER FUNCTION {name}() SET search_path = pg_catalog, %I',
                           current_schema());
        END $pin$""")


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def upgrade() -> None:
    _function("portalq_job_status_notify",
              f"SELECT job_id, to_status AS status FROM inserted "
              f"WHERE to_status IN ({_quoted(DECIDED)})")
    op.execute("""
        CREATE TRIGGER job_events_status_notify AFTER INSERT ON job_events
        REFERENCING NEW TABLE AS inserted
        FOR EACH STATEMENT EXECUTE FUNCTION portalq_job_status_notify()""")
    _function("portalq_job_waiting_notify",
              f"SELECT DISTINCT job_id, 'waiting_for_person'::text AS status FROM inserted "
              f"WHERE kind IN ({_quoted(PERSON_KINDS)})")
    op.execute("""
        CREATE TRIGGER escalations_waiting_notify AFTER INSERT ON escalations
        REFERENCING NEW TABLE AS inserted
        FOR EACH STATEMENT EXECUTE FUNCTION portalq_job_waiting_notify()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER escalations_waiting_notify ON escalations")
    op.execute("DROP FUNCTION portalq_job_waiting_notify()")
    op.execute("DROP TRIGGER job_events_status_notify ON job_events")
    op.execute("DROP FUNCTION portalq_job_status_notify()")

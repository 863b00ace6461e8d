"""The schema as SQLAlchemy metadata: what the migrations must reproduce.

``tests/integration/test_migrations.py`` compares the migrated database with this metadata
(alembic autogenerate finds no difference).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    Time,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from portalq.jobs.db.location import schema

# every object in portalq's own schema (PORTALQ_SCHEMA), never in the application's
metadata = MetaData(schema=schema())

_status_check = "status IN ('pending','deferred','running','completed','failed','cancelled')"
TZ = DateTime(timezone=True)

portals = Table(
    "portals", metadata,
    Column("code", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("timezone", Text, nullable=False),
    Column("holiday_country", Text),
    Column("holiday_subdiv", Text),
    # NULL: no limit
    Column("max_concurrent_sessions", Integer, server_default=text("1")),
    Column("cutoff_minutes", Integer, nullable=False, server_default=text("0")),
    Column("enabled", Boolean, nullable=False, server_default=text("true")),
    Column("paused_at", TZ),
    Column("pause_reason", Text),
    # "breaker" (resumes by itself when a probe passes) or "operator" (until resumed)
    Column("paused_by", Text),
    Column("probe_at", TZ),
    # consecutive outage signs from different jobs (one job failing again is not a streak)
    Column("outage_streak", Integer, nullable=False, server_default=text("0")),
    Column("outage_last_job", BigInteger),
    # which region's holidays portal_holidays holds for this portal, for which years
    # (scheduler.calendar_cache keeps them; the service never needs the `holidays` package)
    Column("holidays_region", Text),
    Column("holidays_from", SmallInteger),
    Column("holidays_to", SmallInteger),
    # the real portal's address (flows start there); a demo or test overrides it explicitly
    Column("url", Text),
    # the job types held for a page their flow does not know, until an operator resumes the
    # portal: {job_type: {"at": ..., "reason": ...}} (migration 0031)
    Column("drift_pauses", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("updated_at", TZ, nullable=False, server_default=text("now()")),
    CheckConstraint("max_concurrent_sessions > 0", name="portals_max_sessions_positive"),
    CheckConstraint("cutoff_minutes >= 0", name="portals_cutoff_nonnegative"),
)

portal_holidays = Table(
    "portal_holidays", metadata,
    Column("portal", Text, ForeignKey("portals.code", ondelete="CASCADE"), primary_key=True),
    Column("day", Date, primary_key=True),
    Column("name", Text, nullable=False),
)

portal_hours = Table(
    "portal_hours", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("portal", Text, ForeignKey("portals.code", ondelete="CASCADE"), nullable=False),
    Column("weekday", SmallInteger, nullable=False),
    Column("opens", Time, nullable=False),
    Column("closes", Time, nullable=False),
    CheckConstraint("weekday BETWEEN 0 AND 6", name="portal_hours_weekday"),
    Index("portal_hours_portal", "portal"),
)

portal_closures = Table(
    "portal_closures", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("portal", Text, ForeignKey("portals.code", ondelete="CASCADE"), nullable=False),
    Column("starts_at", TZ, nullable=False),
    Column("ends_at", TZ, nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_at", TZ, nullable=False, server_default=text("now()")),
    CheckConstraint("ends_at > starts_at", name="portal_closures_order"),
    Index("portal_closures_portal", "portal", "ends_at"),
)

job_queue = Table(
    "job_queue", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("job_type", Text, nullable=False),
    Column("order_id", Text, nullable=False),
    Column("portal", Text, nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("status", Text, nullable=False, server_default=text("'pending'")),
    Column("priority", SmallInteger, nullable=False, server_default=text("0")),
    Column("run_at", TZ, nullable=False),
    Column("attempts", SmallInteger, nullable=False, server_default=text("0")),
    Column("max_attempts", SmallInteger, nullable=False, server_default=text("5")),
    Column("idempotency_key", Text),
    Column("rate_key", Text),
    Column("lock_owner", Text),
    Column("heartbeat_at", TZ),
    Column("started_at", TZ),
    Column("checkpoint", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("result", JSONB),
    Column("last_error", Text),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("finished_at", TZ),
    # rescues after a worker died (each refunds its attempt, up to the crash limit)
    Column("crashes", SmallInteger, nullable=False, server_default=text("0")),
    # failed runs as a paused portal's probe (refunded, up to the probe limit)
    Column("probe_failures", SmallInteger, nullable=False, server_default=text("0")),
    # the secret payload fields, sealed (jobs/secrets/sealing.py, migration 0012): the
    # KEK's id, the job's data key wrapped by it, the ciphertext; NULL once erased
    Column("secret_key_id", Text),
    Column("secret_dek", LargeBinary),
    Column("secret_data", LargeBinary),
    Column("secrets_erased_at", TZ),
    CheckConstraint(_status_check, name="job_queue_status"),
    CheckConstraint("max_attempts > 0", name="job_queue_max_attempts_positive"),
    # only jobs that have a key are indexed (most have none)
    Index("job_queue_idempotency_key", "idempotency_key", unique=True,
          postgresql_where=text("idempotency_key IS NOT NULL")),
    # the claim: due jobs of one portal by priority then run_at (see jobs/db/sql/queries.sql)
    Index("job_queue_claim", "portal", text("priority DESC"), "run_at", "id",
          postgresql_where=text("status IN ('pending','deferred')")),
    Index("job_queue_running", "heartbeat_at", postgresql_where=text("status = 'running'")),
    Index("job_queue_order", "order_id"),
    Index("job_queue_finished", "finished_at",
          postgresql_where=text("status IN ('completed','cancelled')")),
    Index("job_queue_rate", "portal", "rate_key", "started_at",
          postgresql_where=text("rate_key IS NOT NULL")),
    # erasure of failed jobs' secrets and their pruning (migration 0012)
    Index("job_queue_failed", "finished_at", postgresql_where=text("status = 'failed'")),
    # the ended jobs that recorded a registry's decision, read by the ETA (migration 0030)
    Index("job_queue_decided", "finished_at",
          postgresql_where=text("status IN ('completed', 'cancelled', 'failed') "
                                "AND checkpoint ? 'decided'")),
)

job_events = Table(
    "job_events", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    # no foreign key (migration 0007): a lookup per event row; prune_finished deletes a
    # job's events with it
    Column("job_id", BigInteger, nullable=False),
    Column("at", TZ, nullable=False),
    Column("attempt", SmallInteger, nullable=False),
    Column("from_status", Text),
    Column("to_status", Text, nullable=False),
    Column("error", Text),
    Column("worker", Text),
    Column("detail", JSONB),
    Index("job_events_job", "job_id", "id"),
)

escalations = Table(
    "escalations", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("job_id", BigInteger, ForeignKey("job_queue.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", SmallInteger, nullable=False),
    Column("kind", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("sent_at", TZ),
    Column("send_attempts", Integer, nullable=False, server_default=text("0")),
    Column("next_try_at", TZ, nullable=False),
    Column("last_send_error", Text),
    # the mail as built for its last send (scrubbed RFC 5322 bytes): what the console shows
    Column("message", LargeBinary),
    # the random part of its mail's Message-ID (no other database repeats it; 0029)
    Column("mail_token", Text, server_default=text("replace(gen_random_uuid()::text, '-', '')")),
    # the escalation whose mail started the thread this one was mailed in (one cause; 0029)
    Column("mail_thread", BigInteger),
    # one escalation per failure of a job (an admin retry that fails again makes a new one)
    UniqueConstraint("job_id", "attempt", "kind", name="escalations_once"),
    Index("escalations_unsent", "next_try_at", postgresql_where=text("sent_at IS NULL")),
    Index("escalations_approval", "job_id", postgresql_where=text("kind = 'approval'")),
    Index("escalations_threads", "kind", "created_at",
          postgresql_where=text("mail_thread IS NOT NULL")),
    # a failed job's latest failure escalation, read from the index alone (the console's
    # "Needs you" groups and its count, issue 39)
    Index("escalations_failure_latest", "job_id", text("id DESC"), postgresql_include=["kind"],
          postgresql_where=text("kind NOT IN ('question', 'approval')")),
)

portal_notices = Table(
    "portal_notices", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("portal", Text, ForeignKey("portals.code", ondelete="CASCADE"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("sent_at", TZ),
    Column("send_attempts", Integer, nullable=False, server_default=text("0")),
    Column("next_try_at", TZ, nullable=False),
    Column("last_send_error", Text),
    Column("mail_token", Text, server_default=text("replace(gen_random_uuid()::text, '-', '')")),
    CheckConstraint("kind IN ('paused','resumed','password_expiring')",
                    name="portal_notices_kind"),
    Index("portal_notices_unsent", "next_try_at", postgresql_where=text("sent_at IS NULL")),
)

job_documents = Table(
    "job_documents", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("job_id", BigInteger, ForeignKey("job_queue.id", ondelete="CASCADE"), nullable=False),
    Column("name", Text, nullable=False),
    Column("content_type", Text, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", TZ, nullable=False),
    # the KEK that wraps the document's data key (data is then a sealed blob, 0012)
    Column("key_id", Text),
    UniqueConstraint("job_id", "name", name="job_documents_name"),
)

job_artifacts = Table(
    "job_artifacts", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("job_id", BigInteger, ForeignKey("job_queue.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", SmallInteger, nullable=False),
    Column("kind", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("created_at", TZ, nullable=False),
    # kind 'missing': evidence that could not be made, and why
    Column("note", Text),
    Index("job_artifacts_job", "job_id", "attempt"),
)

# the newest masked frame of a running browser job's live view (migration 0032; unlogged)
live_frames = Table(
    "live_frames", metadata,
    Column("job_id", BigInteger, ForeignKey("job_queue.id", ondelete="CASCADE"),
           primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("taken_at", Float, nullable=False),
    Column("published_at", TZ, nullable=False),
    Column("width", Integer, nullable=False),
    Column("height", Integer, nullable=False),
    Column("url", Text, nullable=False),
    Column("jpeg", LargeBinary, nullable=False),
    Column("holder", Text),
    Column("held_at", TZ),
    prefixes=["UNLOGGED"],
)

# one row per job that showed an outage sign on a portal (the breaker's window)
portal_outage_signs = Table(
    "portal_outage_signs", metadata,
    Column("portal", Text, primary_key=True),
    Column("job_id", BigInteger, primary_key=True),
    Column("seen_at", TZ, nullable=False),
)
# -- the admin console (migration 0011) -----------------------------------------------------

console_users = Table(
    "console_users", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("role", Text, nullable=False),
    # Argon2id (argon2-cffi's encoded form, parameters included); NULL: signs in only
    # through single sign-on (console_sso_identities, migration 0016)
    Column("password_hash", Text),
    Column("created_at", TZ, nullable=False),
    Column("password_changed_at", TZ, nullable=False),
    Column("disabled_at", TZ),
    CheckConstraint("role IN ('viewer','operator','admin')", name="console_users_role"),
)

console_sessions = Table(
    "console_sessions", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    # sha256 of the random token the (signed) cookie carries: a stolen table opens nothing
    Column("token_hash", Text, nullable=False, unique=True),
    Column("user_id", BigInteger, ForeignKey("console_users.id", ondelete="CASCADE"),
           nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("last_seen_at", TZ, nullable=False),
    Column("ended_at", TZ),
    Index("console_sessions_user", "user_id"),
)

# who signs in through the OpenID Connect provider: (issuer, sub) -> one console user
console_sso_identities = Table(
    "console_sso_identities", metadata,
    Column("issuer", Text, primary_key=True),
    Column("subject", Text, primary_key=True),
    Column("user_id", BigInteger, ForeignKey("console_users.id", ondelete="CASCADE"),
           nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("last_sign_in_at", TZ, nullable=False),
    UniqueConstraint("user_id", name="console_sso_identities_user"),
)

console_login_failures = Table(
    "console_login_failures", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("at", TZ, nullable=False),
    Column("name", Text, nullable=False),
    Column("ip", Text, nullable=False),
    Index("console_login_failures_name", "name", "at"),
    Index("console_login_failures_ip", "ip", "at"),
)

audit_log = Table(
    "audit_log", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("at", TZ, nullable=False),
    Column("actor", Text, nullable=False),
    Column("role", Text),
    # "console" or "cli"
    Column("source", Text, nullable=False),
    Column("action", Text, nullable=False),
    # e.g. "job:42", "portal:irs_ein", "user:ada", "jobs:bulk"
    Column("target", Text, nullable=False),
    Column("reason", Text, nullable=False),
    # secret fields masked before they get here (jobs.secrets.redaction)
    Column("before", JSONB),
    Column("after", JSONB),
    Index("audit_log_target", "target", "id"),
)

escalation_handling = Table(
    "escalation_handling", metadata,
    Column("escalation_id", BigInteger, ForeignKey("escalations.id", ondelete="CASCADE"),
           primary_key=True),
    Column("acknowledged_at", TZ),
    Column("acknowledged_by", Text),
    Column("assigned_to", Text),
    Column("resolved_at", TZ),
    Column("resolved_by", Text),
    Column("updated_at", TZ, nullable=False),
)

# the console's job list (keyset by id) for the statuses an operator filters on most; partial,
# so finished jobs (the bulk of the table) add nothing to them
# (INCLUDE: the overview's depth by portal and failures per hour come from the index alone)
Index("job_queue_failed_id", job_queue.c.id, postgresql_include=["portal", "finished_at"],
      postgresql_where=text("status = 'failed'"))
Index("job_queue_waiting_id", job_queue.c.id, postgresql_include=["portal", "status"],
      postgresql_where=text("status IN ('pending','deferred')"))
# the console's portal and job-type filters, newest first (migration 0026)
Index("job_queue_portal_id", job_queue.c.portal, job_queue.c.id)
Index("job_queue_type_id", job_queue.c.job_type, job_queue.c.id)
# the console's substring search: job_search, one row per job that has a searchable payload
# field (jobs.admin.reads.SEARCH_FIELDS, "." as "_"), written once per job by the indexer
# (migration 0033; not at each transition, as an index on job_queue is), with a trigram
# (pg_trgm) index per field (migration 0026 names pg_trgm's schema in the opclass)
job_search = Table(
    "job_search", metadata,
    Column("job_id", BigInteger, ForeignKey("job_queue.id", ondelete="CASCADE"),
           primary_key=True),
    *(Column(_column, Text) for _column in
      ("legal_name", "company_name", "names", "applicant_name")),
)
for _column in ("legal_name", "company_name", "names", "applicant_name"):
    Index(f"job_search_{_column}", job_search.c[_column], postgresql_using="gin",
          postgresql_ops={_column: "gin_trgm_ops"},
          postgresql_where=text(f"{_column} IS NOT NULL"))
# the indexer's high-water mark (migration 0033, jobs/search_index.py): one row
job_search_mark = Table(
    "job_search_mark", metadata,
    Column("one", Boolean, primary_key=True, server_default=text("true")),
    Column("indexed_to", BigInteger, nullable=False),
    Column("checked_at", TZ, nullable=False, server_default=text("now()")),
    Column("pending_to", BigInteger),
    Column("pending_xmax", BigInteger),
    Column("pending_since", TZ),
    CheckConstraint("one", name="job_search_mark_one_check"),
)

portal_accounts = Table(
    "portal_accounts", metadata,
    Column("portal", Text, ForeignKey("portals.code"), nullable=False),
    Column("name", Text, nullable=False),
    Column("username", Text, nullable=False),
    Column("paused_at", TZ),
    Column("pause_reason", Text),
    Column("paused_by", Text),
    Column("in_use_by", Text),
    Column("in_use_until", TZ),
    Column("last_used_at", TZ),
    Column("password_expires_on", Date),
    Column("session_state", LargeBinary),
    Column("session_key_id", Text),
    Column("created_at", TZ, nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("portal", "name"),
    CheckConstraint("name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'", name="portal_accounts_name"),
)

job_questions = Table(
    "job_questions", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("job_id", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("question", Text, nullable=False),
    Column("asked_at", TZ, nullable=False),
    Column("deadline", TZ, nullable=False),
    Column("answer", LargeBinary),
    Column("answer_key_id", Text),
    Column("answered_at", TZ),
    Column("answered_by", Text),
    Column("read_at", TZ),
    Index("job_questions_job", "job_id", "id"),
)

# webhooks (issue 36): the app's endpoints, one delivery per event, one log row per attempt
webhook_subscriptions = Table(
    "webhook_subscriptions", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("url", Text, nullable=False),
    Column("events", ARRAY(Text), nullable=False),
    Column("key_id", Text, nullable=False),
    Column("secret", LargeBinary, nullable=False),   # whsec_..., sealed
    Column("created_at", TZ, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("failures", Integer, nullable=False, server_default=text("0")),
    Column("paused_at", TZ),
    Column("pause_reason", Text),
    Column("pause_told_at", TZ),
    # the subscription's backoff: its next try after failures (new events queue behind it),
    # and the reservation of its one attempt under way (migration 0027)
    Column("retry_at", TZ),
    Column("busy_until", TZ),
)

webhook_deliveries = Table(
    "webhook_deliveries", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("msg_id", Text, nullable=False,
           server_default=text("('msg_'::text || replace((gen_random_uuid())::text, "
                               "'-'::text, ''::text))")),
    Column("subscription_id", BigInteger,
           ForeignKey("webhook_subscriptions.id", ondelete="CASCADE"), nullable=False),
    Column("job_id", BigInteger, nullable=False),
    Column("event", Text, nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("next_try_at", TZ, nullable=False),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("body", LargeBinary),
    Column("delivered_at", TZ),
    Column("last_error", Text),
    Column("decision", Text),   # a "decided" event's: approved, rejected, filed, not_filed
    UniqueConstraint("msg_id", name="webhook_deliveries_msg_id"),
    Index("webhook_deliveries_due", "next_try_at",
          postgresql_where=text("delivered_at IS NULL")),
    Index("webhook_deliveries_delivered", "delivered_at",
          postgresql_where=text("delivered_at IS NOT NULL")),
)

webhook_attempts = Table(
    "webhook_attempts", metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("delivery_id", BigInteger,
           ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), nullable=False),
    Column("at", TZ, nullable=False),
    Column("status_code", Integer),
    Column("error", Text),
    Column("took_ms", Integer, nullable=False),
    Index("webhook_attempts_delivery", "delivery_id"),
)

# orders as pipelines (issue 41, jobs/business/order_runs.py): an order of a declared kind and its
# steps, each one job; a step waiting for others is a job held (deferred to HELD_UNTIL,
# which the claim never reaches) until they completed
orders = Table(
    "orders", metadata,
    Column("order_id", Text, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("created_at", TZ, nullable=False),
    # the order's input, sealed whole (it carries the responsible party's SSN); erased once
    # no step waits for it any more
    Column("input_key_id", Text),
    Column("input_data", LargeBinary),
    Column("input_erased_at", TZ),
    Column("cancelled_at", TZ),
    Column("cancel_reason", Text),
)

order_steps = Table(
    "order_steps", metadata,
    Column("order_id", Text, ForeignKey("orders.order_id", ondelete="CASCADE"),
           nullable=False),
    Column("step", Text, nullable=False),
    # no foreign key: finished jobs are pruned, the order's record stays
    Column("job_id", BigInteger, nullable=False),
    Column("after", ARRAY(Text), nullable=False),
    # waiting for the steps ``after`` (its job held, with an empty payload)
    Column("held", Boolean, nullable=False),
    PrimaryKeyConstraint("order_id", "step", name="order_steps_pkey"),
    UniqueConstraint("job_id", name="order_steps_job"),
    Index("order_steps_held", "order_id", postgresql_where=text("held")),
)

"""The rows the queue's repositories return, typed.

They are ``TypedDict``s: at run time the plain dicts psycopg's ``dict_row`` builds (so
``row["status"]``, ``dict(row)``, JSON output and the console's templates stay as they
are), and to mypy rows whose keys and value types are known. Statuses and kinds are the
``Literal`` words of :mod:`jobs.kinds` (a ``StrEnum`` member compares equal to them).

Each says the statement it is the row of (``jobs/db/sql/queries.sql``); a test checks that
the statements return exactly these columns.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from portalq.jobs.kinds import EscalationKindName, JobStatusName, NoticeKindName


class JobRow(TypedDict):
    """A whole ``job_queue`` row (``get_job``)."""

    id: int
    job_type: str
    order_id: str
    portal: str
    payload: dict[str, Any]
    status: JobStatusName
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    idempotency_key: str | None
    rate_key: str | None
    lock_owner: str | None
    heartbeat_at: datetime | None
    started_at: datetime | None
    checkpoint: dict[str, Any]
    result: Any
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    crashes: int
    probe_failures: int
    secret_key_id: str | None
    secret_dek: bytes | None
    secret_data: bytes | None
    secrets_erased_at: datetime | None


class JobDetail(JobRow):
    """A job with its history (``portalq jobs show``): events, artifacts, documents."""

    events: list[dict[str, Any]]
    artifacts: list[dict[str, Any]]
    documents: list[dict[str, Any]]


class JobListRow(TypedDict):
    """A job as ``portalq jobs list`` shows it (``list_jobs``)."""

    id: int
    job_type: str
    order_id: str
    portal: str
    status: JobStatusName
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    last_error: str | None
    created_at: datetime
    updated_at: datetime


class ClaimRow(TypedDict):
    """A job a worker just claimed (``claim``): what running it needs; ``from_status`` is
    where the claim took it from (``pending`` or ``deferred``)."""

    id: int
    job_type: str
    order_id: str
    portal: str
    payload: dict[str, Any]
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    checkpoint: dict[str, Any]
    created_at: datetime
    rate_key: str | None
    crashes: int
    probe_failures: int
    secret_key_id: str | None
    secret_dek: bytes | None
    secret_data: bytes | None
    from_status: JobStatusName


class PortalRow(TypedDict):
    """A portal (``list_portals``)."""

    code: str
    name: str
    timezone: str
    holiday_country: str | None
    holiday_subdiv: str | None
    max_concurrent_sessions: int | None
    cutoff_minutes: int
    enabled: bool
    paused_at: datetime | None
    pause_reason: str | None
    paused_by: str | None       # "breaker", "operator" or "drift" (a changed page)
    probe_at: datetime | None
    outage_streak: int
    url: str | None
    #: job types held for a page their flow does not know: {job_type: {"at", "reason"}}
    drift_pauses: dict[str, dict[str, str]]


class PortalState(TypedDict):
    """A portal's pause state, as an audit row records it before and after."""

    paused_at: datetime | None
    paused_by: str | None
    pause_reason: str | None
    enabled: bool
    #: the job types held for a changed page
    held: list[str]


class EscalationRow(TypedDict):
    """An escalation due to be mailed, with its job (``due_escalations``)."""

    id: int
    job_id: int
    attempt: int
    kind: EscalationKindName
    reason: str
    send_attempts: int
    created_at: datetime
    mail_token: str | None      # its Message-ID's random part (None: mailed before 0029)
    job_type: str
    order_id: str
    portal: str
    attempts: int
    max_attempts: int
    last_error: str | None
    checkpoint: dict[str, Any]
    status: JobStatusName


class NoticeRow(TypedDict):
    """A portal notice due to be mailed (``due_notices``)."""

    id: int
    portal: str
    kind: NoticeKindName
    reason: str
    send_attempts: int
    mail_token: str | None      # its Message-ID's random part (None: mailed before 0029)

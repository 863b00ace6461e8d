"""The queue's names, in one place: job statuses, artifact and event kinds, the
NOTIFY channels, and the advisory-lock keys (two-int keys share their first half).

Each is a ``StrEnum``/``IntEnum``, so a value compares equal to the bare string or
number stored in (and read back from) PostgreSQL."""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Literal


class JobStatus(StrEnum):
    PENDING = "pending"
    DEFERRED = "deferred"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: a job's status as a row holds it (the same words as :class:`JobStatus`; a test keeps
#: them equal): what typed rows (:mod:`jobs.rows`) declare
JobStatusName = Literal["pending", "deferred", "running", "completed", "failed", "cancelled"]

#: statuses a job never leaves by itself
FINAL = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED})


class ArtifactKind(StrEnum):
    SCREENSHOT = "screenshot"
    TRACE = "trace"
    FILE = "file"
    MISSING = "missing"      # evidence that could not be taken (its reason in ``note``)


class Channel(StrEnum):
    """NOTIFY channels (triggers and ``pg_notify`` in queries.sql send on them)."""

    JOBS = "portalq_jobs"          # a job became due (enqueue, retry, resume)
    PORTALS = "portalq_portals"    # a portal's hours, closures or pause changed
    OUTBOX = "portalq_outbox"      # an escalation or notice may be due
    ANSWERS = "portalq_answers"    # a person answered a waiting job's question
    LIVE = "portalq_live"          # a running job's live view has a new frame (console only)
    LIVE_INPUT = "portalq_live_input"  # a person's input to a job's page (its worker only)


#: what the service's loops listen on (the live view's channels have listeners of their own)
SERVICE_CHANNELS = tuple(c for c in Channel if c not in (Channel.LIVE, Channel.LIVE_INPUT))


class LockKey(IntEnum):
    """Advisory-lock keys. Single keys take the whole bigint; a two-int key is
    ``(key, hashtext(name))``."""

    MIGRATE = 7262010001       # schema upgrades, one process at a time
    LEADER = 7262010200        # the node that runs the tick's duties
    CLAIM_PORTAL = 726201      # (key, hashtext(portal)): claims of a limited portal
    RATE_KEY = 726202          # (key, hashtext(rate_key)): per-key rate counts


class EventKind(StrEnum):
    """What a ``job_events`` row's ``detail.event`` says happened (the history's labels;
    statements in queries.sql write the same words)."""

    ENQUEUED = "enqueued"
    CLAIM_UNDONE = "claim undone"
    RATE_LIMITED = "rate limit: one per key per portal day"
    PORTAL_CLOSED = "portal closed"
    DEFERRED_BY_HANDLER = "deferred by handler"
    PROBE_FAILED = "probe failed"
    PROBE_GIVEN_UP = "probe given up"
    RELEASED = "released at shutdown"
    RESCUED = "rescued"
    ADMIN_RETRY = "admin retry"
    ADMIN_CANCEL = "admin cancel"
    ADMIN_CONFIRMED_FILED = "admin confirmed filed"
    LOOKUP_BEFORE_PERSON = "one more attempt: a lookup before a person is asked"
    PORTAL_CHANGED = "portal changed: waits for an operator's resume"
    ORDER_STEP_RELEASED = "order step released: the steps before it completed"
    ORDER_CANCELLED = "order cancelled"


class EscalationKind(StrEnum):
    """Why a job needs a human (an escalation row's ``kind``)."""

    BUSINESS = "business"      # the portal said no (a rejected name, a bad password)
    UNCERTAIN = "uncertain"    # it may have been filed: a person checks the portal
    ATTEMPTS = "attempts"      # every attempt failed
    PROBE = "probe"            # it kept failing as the probe of a paused portal
    CRASHING = "crashing"      # its worker kept dying
    PORTAL_CHANGED = "portal_changed"   # a page the flow does not know: its portal paused
    AT_RISK = "at_risk"        # its p90 ETA passes its deadline: told before it is missed
    QUESTION = "question"      # its flow asks a person mid-flow (jobs/operations/questions.py)
    APPROVAL = "approval"      # it waits at the review page for a person's approval


#: an escalation row's ``kind`` as stored (the words of :class:`EscalationKind`)
EscalationKindName = Literal["business", "uncertain", "attempts", "probe", "crashing",
                            "portal_changed", "at_risk", "question", "approval"]


class NoticeKind(StrEnum):
    """What a portal notice (``portal_notices.kind``) tells the admins."""

    PAUSED = "paused"                          # the breaker or an operator paused it
    RESUMED = "resumed"                        # a probe job succeeded
    PASSWORD_EXPIRING = "password_expiring"    # an account's password expires soon


NoticeKindName = Literal["paused", "resumed", "password_expiring"]


#: the statuses as the table's check constraint lists them (jobs/db/models.py); here, not
#: beside the tables, so the console and the CLI read them without loading SQLAlchemy
JOB_STATUSES = ("pending", "deferred", "running", "completed", "failed", "cancelled")
#: the console's roles, least to most
CONSOLE_ROLES = ("viewer", "operator", "admin")

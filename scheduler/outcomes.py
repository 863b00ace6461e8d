"""The outcome policy: what a job's failed run becomes (a pure function, no database).

    exception, job, portal state, now  ->  Transition (pending | deferred | failed, ...)

- a closed page or a handler's deferral: deferred, the attempt refunded;
- a page the flow does not know (``PortalChanged``): its portal is paused for an operator
  (by the caller, before deciding); the job waits, the attempt refunded, and the failure
  that paused the portal carries its one ``portal_changed`` escalation -- unless the job is
  past its point of no return on a portal without a lookup: then it may have been filed
  (failed, "uncertain");
- an outage sign on a portal the breaker has paused: deferred to after the next probe,
  refunded — but a job that has failed as the probe ``probe_limit`` times with no other
  job failing meanwhile is failed and escalated ("probe"), so a broken job cannot keep a
  healthy portal paused (probes of several jobs failing in turn are the portal's outage,
  and so is a probe failing while the portal's landing page does not answer either:
  nobody is given up for it);
- a business error or an uncertain outcome: failed and escalated at once;
- anything else: retried with backoff (a backoff landing in closed hours waits for the
  opening) until the attempts are spent; then failed and escalated — as "uncertain", not
  "attempts", when the job is past its point of no return (it may have been filed) on a
  portal without a lookup; on a portal with one it first gets one more attempt (its
  lookup), and its "attempts" escalation never suggests cancelling.

Only errors that point at the portal count as outage signs (:func:`is_outage_sign`): a
maintenance page, a 5xx answer or a lost connection (``PortalUnavailable``), a timeout.
A flow's own trouble (a control it expected and did not find) never pauses a portal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from portalq.jobs import retry
from portalq.jobs.checkpoints import LOOKUP_ANSWERS, past_point_of_no_return
from portalq.jobs.errors import (
    BusinessError,
    DeferUntil,
    PortalChanged,
    PortalClosed,
    PortalUnavailable,
    RetryableError,
    UncertainOutcome,
)
from portalq.jobs.kinds import EscalationKind as Esc
from portalq.jobs.kinds import EventKind, JobStatus
from portalq.jobs.waiting import WaitOnPortal

MIN_DEFER = timedelta(seconds=1)
FAILED, DEFERRED = JobStatus.FAILED, JobStatus.DEFERRED

#: a job's checkpoint key saying for which attempt budget (its max_attempts) it was given
#: its one automatic lookup: one per budget, so an admin's retry earns another
LOOKUP_MARK = "lookup_granted"

UNCERTAIN_WARNING = ("it may have been filed: check the portal, then say what you found "
                     "(--confirmed-filed or --not-filed); do not cancel or retry blindly")


@dataclass(frozen=True)
class Policy:
    job_timeout_seconds: float = 900.0
    retry_base_seconds: float = 30.0
    retry_cap_seconds: float = 3600.0
    probe_seconds: float = 300.0
    probe_limit: int = 3          # 0: a probe job is never given up on


@dataclass(frozen=True)
class PortalState:
    """The job's portal as the policy needs it (after this failure's outage sign)."""

    paused_by: str | None = None          # "breaker" | "operator" | "drift" | None
    probe_at: datetime | None = None      # next probe of a breaker-paused portal
    just_paused: bool = False             # this failure's sign tripped the breaker
    probe: bool = True                    # this run started after the pause (the probe)
    #: another job showed an outage sign since this job's last one (their probes fail too)
    others_failing: bool = False
    #: the portal's landing page did not answer either (checked after this failed probe)
    landing_down: bool = False
    next_startable: Callable[[datetime], datetime | None] | None = None
    #: this failure (a changed page) paused the portal: it carries the escalation
    drift_paused: bool = False


@dataclass(frozen=True)
class Transition:
    status: JobStatus                  # pending | deferred | failed
    outcome: str                       # metrics label
    error: str
    run_at: datetime | None = None
    refund_attempt: bool = False
    escalation: tuple[Esc, str] | None = None
    detail: Mapping[str, Any] | None = field(default=None)
    probe_failed: bool = False
    extra_attempt: bool = False        # one more attempt (its automatic lookup)
    checkpoint_patch: Mapping[str, Any] | None = None
    drop_checkpoint: tuple[str, ...] = ()


def is_outage_sign(exc: BaseException) -> bool:
    return (isinstance(exc, PortalClosed) and exc.outage) or isinstance(
        exc, PortalUnavailable | TimeoutError)


def breaker_reason(threshold: int, window_seconds: float, message: str) -> str:
    """Why the circuit breaker paused a portal (stored with the pause, shown to admins)."""
    return (f"outage signs from {threshold} jobs within {window_seconds:.0f}s; "
            f"last: {message}")


def decide(exc: BaseException, job: Mapping[str, Any], *, message: str, now: datetime,
           portal: PortalState, policy: Policy,
           checkpoint: Mapping[str, Any] | None = None,
           reconcilable: bool = False) -> Transition:
    """The transition for job ``job`` (its row as claimed) whose run raised ``exc``.
    ``message`` is the error's text with secrets redacted; ``checkpoint`` the job's
    checkpoints as the run left them; ``reconcilable``: its portal has a lookup, so a
    retry finds a filing the last attempt may have made before it files again."""
    if is_outage_sign(exc) and portal.paused_by is not None:
        return _paused(job, message, now, portal, policy)
    if isinstance(exc, PortalChanged):
        return _changed(exc, job, message, now, portal, checkpoint, reconcilable)
    if isinstance(exc, PortalClosed | DeferUntil):
        when = exc.when if isinstance(exc, DeferUntil) else exc.reopen_at
        if when is None and portal.next_startable is not None:
            when = portal.next_startable(now + MIN_DEFER)
        return Transition(DEFERRED, "deferred", message, run_at=when or now + MIN_DEFER,
                          refund_attempt=True,
                          detail={"event": EventKind.DEFERRED_BY_HANDLER,
                                  "outage": getattr(exc, "outage", False),
                                  # the event "waiting on the portal" (migration 0023)
                                  **({"waiting_on": exc.portal}
                                     if isinstance(exc, WaitOnPortal) else {})})
    if isinstance(exc, BusinessError):
        return Transition(FAILED, "business", message, escalation=(Esc.BUSINESS, message))
    if isinstance(exc, UncertainOutcome):
        return Transition(FAILED, "uncertain", message, escalation=(Esc.UNCERTAIN, message))
    if isinstance(exc, TimeoutError):
        message = f"timed out after {policy.job_timeout_seconds:.0f}s"
    elif not isinstance(exc, RetryableError):
        message = f"{type(exc).__name__}: {message}"
    decision = retry.decide(attempt=job["attempts"], max_attempts=job["max_attempts"],
                            kind="retryable", now=now, base=policy.retry_base_seconds,
                            cap=policy.retry_cap_seconds)
    if decision.action == "retry":
        run_at = decision.run_at
        if portal.next_startable is not None and run_at is not None:
            # a backoff that lands in closed hours waits for the next opening
            run_at = portal.next_startable(run_at) or run_at
        return Transition(JobStatus.PENDING, "retry", message, run_at=run_at)
    cp = checkpoint if checkpoint is not None else job["checkpoint"]
    if past_point_of_no_return(cp):
        if not reconcilable:
            return Transition(FAILED, "uncertain", message, escalation=(
                Esc.UNCERTAIN, f"{job['attempts']} attempts ended after the submission step; "
                             f"{UNCERTAIN_WARNING}; last error: {message}"))
        return _look_up_first(job, cp, message, now, portal, policy)
    return Transition(FAILED, "failed", message, escalation=(
        Esc.ATTEMPTS, f"{job['attempts']} attempts failed; last error: {message}"))


def changed_reason(portal: str, message: str) -> str:
    """Why a portal was paused for a changed page (stored with the pause, shown to admins)."""
    return f"a page the flow does not know: {message}"[:500]


def _changed(exc: PortalChanged, job: Mapping[str, Any], message: str, now: datetime,
             portal: PortalState, checkpoint: Mapping[str, Any] | None,
             reconcilable: bool) -> Transition:
    """A page the flow does not know. Before the point of no return nothing irreversible
    was done: the job waits for the portal (its attempt refunded; the paused portal is not
    claimed until an operator resumes it). After it, on a portal without a lookup, the
    submission may have gone through: a person checks (never sent again blindly)."""
    cp = checkpoint if checkpoint is not None else job["checkpoint"]
    code = job["portal"]
    if past_point_of_no_return(cp) and not reconcilable:
        return Transition(FAILED, "uncertain", message, escalation=(
            Esc.UNCERTAIN, f"after the submission step the portal showed a page the flow "
                           f"does not know (portal {code} paused); {UNCERTAIN_WARNING}; "
                           f"last error: {message}"))
    escalation = None
    if portal.drift_paused:
        escalation = (Esc.PORTAL_CHANGED, (
            f"portal {code} shows a page the flow does not know"
            + (f" at {exc.where}" if exc.where else "") + f": {message}. Nothing "
            f"irreversible was done. Its {job['job_type']} jobs are held and wait (no "
            f"attempts spent); the portal's other job types go on. Compare the screenshot "
            f"and aria-page.yaml with aria-expected.yaml; once the flow is fixed or the page "
            f"is back, resume it: portalq portals resume {code} --reason '...' (or on the "
            f"console's portals page)"))
    return Transition(DEFERRED, "deferred", message, run_at=now + MIN_DEFER,
                      refund_attempt=True, escalation=escalation,
                      detail={"event": EventKind.PORTAL_CHANGED,
                              "paused": portal.drift_paused})


def _look_up_first(job: Mapping[str, Any], cp: Mapping[str, Any], message: str,
                   now: datetime, portal: PortalState, policy: Policy) -> Transition:
    """A job of a portal with a lookup whose attempts are spent past its submission: it
    may have been filed. It gets one more attempt -- its lookup finds the filing, or
    finds none and files -- before a person is asked; the person is then told to retry
    (which looks it up again), never to cancel a job that may be filed."""
    if cp.get(LOOKUP_MARK) != job["max_attempts"]:
        run_at = now + timedelta(seconds=policy.retry_base_seconds)
        if portal.next_startable is not None:
            run_at = portal.next_startable(run_at) or run_at
        return Transition(JobStatus.PENDING, "retry", message, run_at=run_at,
                          extra_attempt=True,
                          checkpoint_patch={LOOKUP_MARK: job["max_attempts"] + 1},
                          drop_checkpoint=LOOKUP_ANSWERS,
                          detail={"event": EventKind.LOOKUP_BEFORE_PERSON})
    return Transition(FAILED, "failed", message, drop_checkpoint=LOOKUP_ANSWERS, escalation=(
        Esc.ATTEMPTS, f"{job['attempts']} attempts failed, the last after the submission "
                    f"step (the last of them looked the filing up first): it may have been "
                    f"filed; a retry looks it up again before it files; do not cancel; "
                    f"last error: {message}"))


def _paused(job: Mapping[str, Any], message: str, now: datetime, portal: PortalState,
            policy: Policy) -> Transition:
    """An outage sign while the portal is paused: the job waits for the portal, no attempt
    spent. A run that started before the pause was no probe: it waits for the probe. A
    probe that failed goes to the back of the line — after the next probe — so the next
    probe is another job. The failure is charged to the job only when no other job showed
    an outage sign since its last one: probes of different jobs failing in turn are the
    portal's outage (however long it lasts, nobody is given up), one job failing probe
    after probe is the job's own trouble -- unless the portal's landing page does not
    answer either (a lone job waiting through the portal's outage); after ``probe_limit``
    charged failures it is given up, so it cannot keep a healthy portal paused."""
    if portal.paused_by != "breaker" or portal.just_paused or not portal.probe:
        return Transition(DEFERRED, "deferred", message,
                          run_at=max(portal.probe_at or now, now + MIN_DEFER),
                          refund_attempt=True,
                          detail={"event": EventKind.DEFERRED_BY_HANDLER, "outage": True})
    next_probe = max(portal.probe_at or now, now)
    if portal.others_failing or portal.landing_down:
        return Transition(DEFERRED, "deferred", message, refund_attempt=True,
                          run_at=next_probe + timedelta(seconds=policy.probe_seconds)
                          + MIN_DEFER,
                          detail={"event": EventKind.PROBE_FAILED, "outage": True,
                                  "probe_failures": int(job.get("probe_failures") or 0),
                                  "charged": False,
                                  **({"landing_down": True} if portal.landing_down else {})})
    failures = int(job.get("probe_failures") or 0) + 1
    if policy.probe_limit and failures >= policy.probe_limit:
        reason = (f"failed {failures} times as the probe of paused portal {job['portal']} "
                  f"with no other job failing meanwhile, and the portal's landing page "
                  f"answered or could not be checked; retry it once the portal works for "
                  f"others; last error: {message}")
        return Transition(FAILED, "probe", message, escalation=(Esc.PROBE, reason),
                          refund_attempt=True, probe_failed=True,
                          detail={"event": EventKind.PROBE_GIVEN_UP, "probe_failures": failures})
    run_at = next_probe + timedelta(seconds=policy.probe_seconds * failures) + MIN_DEFER
    return Transition(DEFERRED, "deferred", message, run_at=run_at, refund_attempt=True,
                      probe_failed=True,
                      detail={"event": EventKind.PROBE_FAILED, "outage": True,
                              "probe_failures": failures})

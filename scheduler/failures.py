"""Recording a failed run: the outage sign counted against its portal (the circuit
breaker), the outcome policy's transition (:mod:`scheduler.outcomes`) written with its
escalation. The decision is the policy's; this module only gathers its inputs and
writes its answer."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from portalq.jobs import clock, types, worker_api
from portalq.jobs.errors import PortalChanged
from portalq.portals.flows.masking import redact
from portalq.scheduler import calendar_cache, metrics, outcomes
from portalq.scheduler.config import Settings
from portalq.scheduler.node_db import Database, first_line

log = logging.getLogger("portalq.worker")


class FailureRecorder:
    def __init__(self, settings: Settings, db: Database, node: str,
                 portal_of: Callable[[str], calendar_cache.Portal | None],
                 refresh_portals: Callable[[], Awaitable[None]], *,
                 landing: Callable[[str], Awaitable[bool | None]] | None = None) -> None:
        self._settings = settings
        #: whether a portal's landing page answers (None: cannot tell)
        self._landing = landing
        self._db = db
        self._node = node
        self._portal_of = portal_of
        self._refresh = refresh_portals
        self.policy = policy_of(settings)

    async def record(self, job: Mapping[str, Any], exc: BaseException, *,
                     secrets: list[str], checkpoint: Mapping[str, Any] | None,
                     extra: Mapping[str, Any]) -> str:
        """Write what ``job``'s failed run becomes; answers the outcome (metrics label)."""
        s = self._settings
        now = clock.now()
        message = redact(first_line(exc), secrets)
        outage = None
        if outcomes.is_outage_sign(exc):
            outage = await self._db.retrying(lambda conn: worker_api.record_outage(
                conn, portal=job["portal"], job_id=job["id"],
                threshold=s.breaker_threshold,
                window=timedelta(seconds=s.breaker_window_seconds),
                probe_after=timedelta(seconds=s.breaker_probe_seconds),
                reason=outcomes.breaker_reason(s.breaker_threshold, s.breaker_window_seconds,
                                               message)))
            if outage.just_paused:
                log.warning("portal %s paused by the circuit breaker", job["portal"],
                            extra=extra)
            if outage.paused_by is not None:
                await self._refresh()   # the pause (and its probe time) as stored
        landing_down = False
        if (outage is not None and outage.paused_by == "breaker" and outage.probe
                and not outage.just_paused and not outage.others_failing
                and self.policy.probe_limit and self._landing is not None):
            # a probe that failed with no other job failing meanwhile: the portal's own
            # outage (its landing page does not answer either) or this job's trouble
            landing_down = await self._landing(job["portal"]) is False
        drift_paused = False
        if isinstance(exc, PortalChanged):   # a page the flow does not know
            drift_paused = await self._db.retrying(lambda conn: worker_api.pause_for_drift(
                conn, portal=job["portal"], job_type=job["job_type"],
                reason=outcomes.changed_reason(job["portal"], message)))
            if drift_paused:
                log.warning("%s held on portal %s: a page the flow does not know (until an "
                            "operator resumes the portal)", job["job_type"], job["portal"],
                            extra=extra)
            await self._refresh()
        portal = self._portal_of(job["portal"])
        t = outcomes.decide(
            exc, job, message=message, now=now, policy=self.policy, checkpoint=checkpoint,
            reconcilable=_reconcilable(job["job_type"]),
            portal=outcomes.PortalState(
                paused_by=outage.paused_by if outage else None,
                just_paused=outage.just_paused if outage else False,
                probe=outage.probe if outage else False,
                others_failing=outage.others_failing if outage else False,
                landing_down=landing_down,
                drift_paused=drift_paused,
                probe_at=portal.probe_at if portal else None,
                next_startable=(lambda at: calendar_cache.next_startable(portal, at))
                if portal is not None else None))
        if t.status == "deferred":
            metrics.DEFERRALS.labels(job["portal"]).inc()
        log.log(logging.INFO if t.outcome == "deferred" else logging.WARNING,
                "job %s: %s", t.outcome, t.error, extra=extra)
        await self._db.retrying(lambda conn: worker_api.finish_unsuccessful(
            conn, job=job, worker=self._node, status=t.status, error=t.error, run_at=t.run_at,
            refund_attempt=t.refund_attempt, escalation=t.escalation, detail=t.detail,
            probe_failed=t.probe_failed, extra_attempt=t.extra_attempt,
            checkpoint_patch=t.checkpoint_patch, drop_checkpoint=t.drop_checkpoint))
        return t.outcome


def policy_of(settings: Settings) -> outcomes.Policy:
    return outcomes.Policy(job_timeout_seconds=settings.job_timeout_seconds,
                           retry_base_seconds=settings.retry_base_seconds,
                           retry_cap_seconds=settings.retry_cap_seconds,
                           probe_seconds=settings.breaker_probe_seconds,
                           probe_limit=settings.breaker_probe_limit)


def _reconcilable(job_type: str) -> bool:
    try:
        return bool(types.get(job_type).reconcilable)
    except Exception:  # noqa: BLE001 - an unknown type: assume no lookup
        return False

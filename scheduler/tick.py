"""The periodic duties, run by one node at a time (a session advisory lock elects it):
defer due jobs of closed portals, rescue stale running jobs, send escalations, prune."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from portalq.jobs import clock, worker_api
from portalq.jobs.business import order_runs
from portalq.jobs.db import connections
from portalq.jobs.operations import portal_rows
from portalq.scheduler import calendar_cache, estimates, metrics
from portalq.scheduler.config import Settings

log = logging.getLogger("portalq.tick")


#: how often the leader looks for order steps at risk of missing their deadline
AT_RISK_EVERY_S = 600.0


class Tick:
    def __init__(self, settings: Settings, worker: Any, dsn: str) -> None:
        self.settings = settings
        self.worker = worker
        self.dsn = dsn
        self.leader = connections.LeaderSession(dsn, stale_after=settings.stale_after_seconds)
        self.last_ok: float | None = None
        self.last_summary: dict[str, int] = {}
        self._holiday_failures: dict[str, Any] = {}   # portal -> day its refresh failed
        self._outbox_kick = asyncio.Event()
        self._at_risk_at: float | None = None

    async def _is_leader(self) -> bool:
        if not await self.leader.lead():
            return False
        if self.leader.fresh:
            log.info("this node runs the maintenance tick")
        return True

    async def run(self) -> dict[str, int]:
        """One tick. Every node refreshes its calendars and wakes its workers; the leader
        also does the shared duties."""
        summary: dict[str, int] = {}
        try:
            await self.worker.refresh_portals()
            if await self._is_leader():
                summary = await self.duties()
            self.worker.wake.set()
            self.last_ok = clock.now().timestamp()
            self.last_summary = summary
        except connections.LOST as exc:
            log.warning("tick skipped: database unavailable (%s)", str(exc).splitlines()[0]
                        if str(exc) else type(exc).__name__)
        return summary

    async def duties(self) -> dict[str, int]:
        """The leader's duties, each on its own: one that fails (a bad row it could not
        skip, a bug) is logged and counted, and the others still run this tick."""
        s = self.settings
        out = {"deferred": 0, "rescued": 0, "escalations_sent": 0, "notices_sent": 0,
               "pruned": 0, "duty_errors": 0}
        now = clock.now()
        async with self.worker.pool.connection() as conn:
            out["holidays_refreshed"] = await self._refresh_holidays(conn, now)
            # typed: a tuple of different lambdas is joined to an untyped ``function``
            duties: tuple[tuple[str, Callable[[], Awaitable[int]]], ...] = (
                ("deferred", lambda: self._defer_closed(conn, now)),
                ("rescued", lambda: self._rescue(conn)),
                ("escalations_sent", lambda: self._outbox_duty(conn, out)),
                ("secrets_erased", lambda: worker_api.erase_failed_secrets(
                    conn, older_than=timedelta(days=s.secret_retention_days))),
                # order steps a crash left held after their predecessors completed
                ("order_steps_released", lambda: _released(conn)),
                ("pruned", lambda: self._prune(conn)),
                ("at_risk_escalated", lambda: self._at_risk(conn)),
                ("landing_resumed", lambda: self._probe_idle(conn)),
                ("artifacts_pruned", lambda: _prune_artifacts(
                    s.artifacts(), older_than=timedelta(days=s.retention_days))))
            for name, duty in duties:
                try:
                    out[name] = await duty()
                except connections.LOST as exc:
                    if connections.is_broken(conn):
                        raise   # the database went away: the tick is skipped
                    self._duty_failed(name, exc, out)
                except Exception as exc:  # noqa: BLE001 - one duty never stops the others
                    self._duty_failed(name, exc, out)
        return out

    @staticmethod
    def _duty_failed(name: str, exc: BaseException, out: dict[str, int]) -> None:
        log.error("tick duty %s failed: %s: %s", name, type(exc).__name__,
                  str(exc).splitlines()[0][:200] if str(exc) else "")
        metrics.DUTY_ERRORS.labels(name).inc()
        out["duty_errors"] += 1

    async def _defer_closed(self, conn: Any, now: Any) -> int:
        """Defer the due jobs of closed portals, portal by portal: a portal whose calendar
        cannot be computed is logged and skipped, the others are deferred. Batches of
        10,000 jobs within a quarter of the tick for all portals (each gets one batch at
        least); what is left waits for the next tick (a closed portal's jobs are not
        claimed meanwhile)."""
        total = 0
        deadline = time.monotonic() + max(1.0, self.settings.tick_seconds / 4)
        for portal in list(self.worker.portals.values()):
            try:
                if calendar_cache.capacity(portal, now) is not False:
                    continue
                if portal.paused:
                    # breaker-paused: wait for the probe; operator-paused: until resumed
                    when = portal.probe_at if portal.paused_by == "breaker" else None
                else:
                    when = calendar_cache.next_startable(portal, now)
                if when is None or when <= now:
                    continue
                try:
                    n = await worker_api.defer_portal(
                        conn, portal=portal.code, next_open=when,
                        reason="paused" if portal.paused else
                        "closed" if portal.enabled else "disabled",
                        budget_seconds=max(0.0, deadline - time.monotonic()))
                except worker_api.DeferIncomplete as exc:
                    log.error("portal %s: %s", portal.code, exc)
                    metrics.DUTY_ERRORS.labels("deferred").inc()
                    n = exc.deferred
            except connections.LOST:
                raise
            except Exception as exc:  # noqa: BLE001 - one portal never stops the others
                log.error("portal %s: jobs not deferred: %s: %s", portal.code,
                          type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")
                metrics.DUTY_ERRORS.labels("deferred").inc()
                continue
            if n:
                metrics.DEFERRALS.labels(portal.code).inc(n)
                log.info("deferred %d job(s) of %s to %s", n, portal.code, when.isoformat())
            total += n
        return total

    async def _at_risk(self, conn: Any) -> int:
        """Order steps whose p90 ETA passes their deadline: a person is told, once (every
        AT_RISK_EVERY_S at most: the ETA replays every waiting job)."""
        mono = time.monotonic()
        if self._at_risk_at is not None and mono - self._at_risk_at < AT_RISK_EVERY_S:
            return 0
        self._at_risk_at = mono
        made = await estimates.aescalate_at_risk(conn)
        if made:
            self.kick_outbox()
        return made

    async def _probe_idle(self, conn: Any) -> int:
        """A breaker-paused portal that no job will probe (its jobs were cancelled, or it
        had one and it was given up) would stay paused with nothing left to probe it: its
        landing page is checked instead (no job's attempt spent) and it resumes when the
        page answers; otherwise its next probe is a probe period away. A portal without an
        address, or a node without a browser now, leaves it to a job or an operator."""
        resumed = 0
        for code in await portal_rows.aidle_probes_due(conn):
            answered = await self.worker.landing_answers(code)
            if answered is None:
                continue
            if await portal_rows.alanding_checked(
                    conn, code, answered=answered,
                    probe_after=timedelta(seconds=self.settings.breaker_probe_seconds)):
                log.warning("portal %s resumed: its landing page answered", code)
                resumed += 1
                self.kick_outbox()   # its 'resumed' notice
        return resumed

    async def _prune(self, conn: Any) -> int:
        try:
            s = self.settings
            return await worker_api.prune_within(
                conn, older_than=timedelta(days=s.retention_days),
                failed_older_than=(timedelta(days=s.failed_retention_days)
                                   if s.failed_retention_days else None),
                budget_seconds=max(1.0, s.tick_seconds / 4))
        except worker_api.PruneIncomplete as exc:
            log.error("prune: %s", exc)
            metrics.DUTY_ERRORS.labels("pruned").inc()
            return exc.pruned

    async def _rescue(self, conn: Any) -> int:
        s = self.settings
        rescued = await worker_api.rescue_stale(
            conn, stale_after=timedelta(seconds=s.stale_after_seconds), worker=s.node_id,
            crash_limit=s.crash_limit)
        for job_id, status in rescued:
            log.warning("rescued stale job %s -> %s", job_id, status)
        metrics.RESCUED.inc(len(rescued))
        return len(rescued)

    async def _outbox_duty(self, conn: Any, out: dict[str, int]) -> int:
        from portalq.scheduler import mailer  # the leader's: see outbox_loop

        esc, notes, _ = await mailer.send_outbox(self.settings, conn)
        out["notices_sent"] = notes
        self.kick_outbox()   # the outbox loop plans its next try from what is left
        return esc

    def kick_outbox(self) -> None:
        """Outbox rows may be due (a NOTIFY from a failed job or a paused portal)."""
        self._outbox_kick.set()

    async def outbox_loop(self) -> None:
        """The leader sends escalations and notices as soon as they are written (not at the
        next tick), and while the mail server is down tries again every few seconds. Each
        message is locked while it is sent and committed as sent right after: none goes
        twice, whichever node sends it."""
        # imported here: a node that never leads never loads the mailer (jinja2, smtplib:
        # ~2.6 MiB of an idle worker; issue 49.2)
        from portalq.scheduler import mailer

        retry = mailer.SERVER_RETRY.total_seconds()
        timeout: float | None = None
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._outbox_kick.wait()
            self._outbox_kick.clear()
            timeout = None
            if not self.leader.held or not self.settings.admins():
                continue   # not the leader (yet): its first tick sends what is due
            try:
                async with self.worker.pool.connection() as conn:
                    await mailer.send_outbox(self.settings, conn)
                    at = await mailer.next_try(conn)
                if at is not None:   # wake when the next unsent message is due again
                    timeout = min(max((at - clock.now()).total_seconds(), 0.05),
                                  self.settings.tick_seconds)
            except connections.LOST as exc:
                log.warning("outbox not sent now (%s); trying again", _first_line(exc))
                timeout = retry
            except Exception as exc:  # noqa: BLE001 - the loop must survive; the tick retries
                log.error("outbox round failed: %s: %s", type(exc).__name__, _first_line(exc))
                timeout = retry

    async def _refresh_holidays(self, conn: Any, now: Any) -> int:
        """Store holidays that are missing (rare: a new year, a new portal or region; this
        imports `holidays`). A portal whose region cannot be computed is tried again the
        next day, and no failure here stops the other duties."""
        skip = {code for code, day in self._holiday_failures.items() if day == now.date()}
        try:
            refreshed, failed = await calendar_cache.refresh_holidays(conn, now, skip=skip)
        except Exception:  # noqa: BLE001 - logged; the other duties still run
            log.exception("storing holidays failed")
            return 0
        self._holiday_failures.update({code: now.date() for code in failed})
        if refreshed:
            log.info("stored holidays of %s", ", ".join(refreshed))
            await self.worker.refresh_portals()
        return len(refreshed)

    async def close(self) -> None:
        await self.leader.close()


async def _released(conn: Any) -> int:

    return len(await order_runs.arelease_held(conn))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def _prune_artifacts(root: Any, *, older_than: timedelta) -> int:
    """Delete per-attempt artifact folders (screenshots, traces) past the retention."""
    def prune() -> int:
        if not root.is_dir():
            return 0
        cutoff = clock.now().timestamp() - older_than.total_seconds()
        gone = 0
        for job_dir in root.iterdir():
            try:
                for attempt_dir in job_dir.glob("attempt-*") if job_dir.is_dir() else ():
                    if attempt_dir.lstat().st_mtime < cutoff:
                        if attempt_dir.is_symlink() or not attempt_dir.is_dir():
                            attempt_dir.unlink()
                        else:
                            shutil.rmtree(attempt_dir, ignore_errors=True)
                        gone += 1
                if job_dir.is_dir() and not any(job_dir.iterdir()):
                    job_dir.rmdir()
            except OSError as exc:  # one folder that cannot be pruned never stops the rest
                log.error("artifacts of %s not pruned: %s", job_dir.name, exc)
        return gone

    return await asyncio.to_thread(prune)

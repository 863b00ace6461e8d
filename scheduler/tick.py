"""The periodic duties, run by one node at a time (a session advisory lock elects it):
defer due jobs of closed portals, rescue stale running jobs, send escalations, prune."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import psycopg

from jobs import clock, sql, worker_api
from scheduler import calendars, mailer, metrics
from scheduler.config import Settings

log = logging.getLogger("portalq.tick")


class Tick:
    def __init__(self, settings: Settings, worker: Any, dsn: str) -> None:
        self.settings = settings
        self.worker = worker
        self.dsn = dsn
        self._leader_conn: psycopg.AsyncConnection[Any] | None = None
        self.last_ok: float | None = None
        self.last_summary: dict[str, int] = {}
        self._holiday_failures: dict[str, Any] = {}   # portal -> day its refresh failed

    async def _is_leader(self) -> bool:
        conn = self._leader_conn
        if conn is not None and not conn.closed:
            try:
                await conn.execute("SELECT 1")
                return True
            except psycopg.Error:
                await conn.close()
        self._leader_conn = None
        conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        row = await sql.afetch_one(conn, "try_leader_lock")
        if row and row["leader"]:
            self._leader_conn = conn
            log.info("this node runs the maintenance tick")
            return True
        await conn.close()
        return False

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
        except (psycopg.OperationalError, OSError) as exc:
            log.warning("tick skipped: database unavailable (%s)", str(exc).splitlines()[0]
                        if str(exc) else type(exc).__name__)
        return summary

    async def duties(self) -> dict[str, int]:
        s = self.settings
        out = {"deferred": 0, "rescued": 0, "escalations_sent": 0, "notices_sent": 0,
               "pruned": 0}
        now = clock.now()
        async with self.worker.pool.connection() as conn:
            out["holidays_refreshed"] = await self._refresh_holidays(conn, now)
            for portal in self.worker.portals.values():
                if calendars.capacity(portal, now) is not False:
                    continue
                if portal.paused:
                    # breaker-paused: wait for the probe; operator-paused: until resumed
                    when = portal.probe_at if portal.paused_by == "breaker" else None
                else:
                    when = calendars.next_startable(portal, now)
                if when is None or when <= now:
                    continue
                n = await worker_api.defer_portal(conn, portal=portal.code, next_open=when,
                                                  reason="paused" if portal.paused else
                                                  "closed" if portal.enabled else "disabled")
                if n:
                    metrics.DEFERRALS.labels(portal.code).inc(n)
                    log.info("deferred %d job(s) of %s to %s", n, portal.code, when.isoformat())
                out["deferred"] += n
            rescued = await worker_api.rescue_stale(
                conn, stale_after=timedelta(seconds=s.stale_after_seconds), worker=s.node_id)
            for job_id, status in rescued:
                log.warning("rescued stale job %s -> %s", job_id, status)
            metrics.RESCUED.inc(len(rescued))
            out["rescued"] = len(rescued)
            out["escalations_sent"] = await mailer.send_due_escalations(s, conn)
            out["notices_sent"] = await mailer.send_due_notices(s, conn)
            out["secrets_erased"] = await worker_api.erase_failed_secrets(
                conn, older_than=timedelta(days=s.secret_retention_days))
            out["pruned"] = await worker_api.prune_finished(
                conn, older_than=timedelta(days=s.retention_days),
                failed_older_than=(timedelta(days=s.failed_retention_days)
                                   if s.failed_retention_days else None))
            out["artifacts_pruned"] = await _prune_artifacts(
                s.artifacts(), older_than=timedelta(days=s.retention_days))
        return out

    async def _refresh_holidays(self, conn: Any, now: Any) -> int:
        """Store holidays that are missing (rare: a new year, a new portal or region; this
        imports `holidays`). A portal whose region cannot be computed is tried again the
        next day, and no failure here stops the other duties."""
        skip = {code for code, day in self._holiday_failures.items() if day == now.date()}
        try:
            refreshed, failed = await calendars.refresh_holidays(conn, now, skip=skip)
        except Exception:  # noqa: BLE001 - logged; the other duties still run
            log.exception("storing holidays failed")
            return 0
        self._holiday_failures.update({code: now.date() for code in failed})
        if refreshed:
            log.info("stored holidays of %s", ", ".join(refreshed))
            await self.worker.refresh_portals()
        return len(refreshed)

    async def close(self) -> None:
        if self._leader_conn is not None:
            await self._leader_conn.close()


async def _prune_artifacts(root: Any, *, older_than: timedelta) -> int:
    """Delete per-attempt artifact folders (screenshots, traces) past the retention."""
    import asyncio
    import shutil

    def prune() -> int:
        if not root.is_dir():
            return 0
        cutoff = clock.now().timestamp() - older_than.total_seconds()
        gone = 0
        for job_dir in root.iterdir():
            for attempt_dir in job_dir.glob("attempt-*") if job_dir.is_dir() else ():
                if attempt_dir.stat().st_mtime < cutoff:
                    shutil.rmtree(attempt_dir, ignore_errors=True)
                    gone += 1
            if job_dir.is_dir() and not any(job_dir.iterdir()):
                job_dir.rmdir()
        return gone

    return await asyncio.to_thread(prune)

"""Workers: claim due jobs of startable portals, run their handlers, record outcomes.

One asyncio loop per process. A committed enqueue NOTIFYs ``portalq_jobs`` and wakes the
claim loop at once; a short poll catches deferred jobs coming due and missed notifications.
Completions are flushed in batches; heartbeats for all running jobs go in one statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from jobs import clock, retry, worker_api
from jobs.errors import (
    BusinessError,
    DeferUntil,
    PortalClosed,
    RetryableError,
    UncertainOutcome,
)
from scheduler import calendars, metrics, roles
from scheduler.config import Settings
from scheduler.context import JobContext, LostJob
from scheduler.handlers import handler_for

log = logging.getLogger("portalq.worker")


#: a pooled connection idle longer than this is tested (one query) before it is handed out
CHECK_IDLE_SECONDS = 2.0
_returned: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


async def _note_return(conn: psycopg.AsyncConnection[Any]) -> None:
    _returned[conn] = time.monotonic()


async def _usable(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pool's check on checkout. A connection in use a moment ago (the busy case: the
    claim loop, completions, heartbeats) is handed out without a round trip; one that sat
    idle is tested first, so one that died meanwhile (a server restart) is replaced
    before a job's checkpoint or document write could fail on it."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("connection closed")
    if time.monotonic() - _returned.get(conn, 0.0) > CHECK_IDLE_SECONDS:
        await AsyncConnectionPool.check_connection(conn)


def make_pool(settings: Settings, dsn: str) -> AsyncConnectionPool:
    """The process's connection pool (opened by the caller)."""
    # issue 18 hook: behind PgBouncer, pool_options() turns off prepared statements
    return AsyncConnectionPool(dsn, min_size=2, max_size=settings.workers + 4, open=False,
                               kwargs={"autocommit": True, **settings.pool_options()},
                               reconnect_timeout=3600,
                               check=_usable, reset=_note_return)


class Worker:
    def __init__(self, settings: Settings, pool: AsyncConnectionPool, dsn: str) -> None:
        self.settings = settings
        self.pool = pool
        self.dsn = dsn
        self.node = settings.node_id
        self.portals: dict[str, calendars.Portal] = {}
        self.running: dict[int, asyncio.Task[None]] = {}
        self.wake = asyncio.Event()
        self.stopping = asyncio.Event()
        self._done: list[tuple[int, Any]] = []
        self._unflushed = 0  # finished handlers whose completion is not written yet
        self._artifacts_root = settings.artifacts()
        self._done_event = asyncio.Event()
        self._calendar_errors: set[str] = set()   # portals whose calendar raised (logged once)
        self._browser: Any = None
        self._playwright: Any = None
        self._browser_lock = asyncio.Lock()
        self.browser_config: Any = None
        self.healthy = True
        self.role = roles.Role.of(settings)  # issue 18 hook: node roles

    # -- browser (one per process, started on first use) ----------------------------------
    async def browser(self) -> Any:
        async with self._browser_lock:
            if self._browser is None or not self._browser.is_connected():
                from playwright.async_api import async_playwright

                from portals.flows import browser

                self.browser_config = browser.load_config()
                if self._playwright is None:
                    self._playwright = await async_playwright().start()
                self._browser = await browser.launch(self._playwright, self.browser_config)
            return self._browser

    async def close_browser(self) -> None:
        with contextlib.suppress(Exception):
            if self._browser is not None:
                await self._browser.close()
            if self._playwright is not None:
                await self._playwright.stop()

    # -- calendars ---------------------------------------------------------------------
    async def refresh_portals(self) -> None:
        async with self.pool.connection() as conn:
            self.portals = await calendars.load(conn)

    def capacities(self) -> list[worker_api.Capacity]:
        now = clock.now()
        out = []
        for p in self.portals.values():
            try:
                cap = calendars.capacity(p, now)
                if cap is not False:
                    out.append(worker_api.Capacity(p.code, cap, calendars.portal_day(p, now)))
            except ValueError as exc:  # e.g. no holiday data for a year: that portal waits
                if p.code not in self._calendar_errors:
                    log.error("portal %s: calendar error (%s); no jobs start on it", p.code, exc)
                self._calendar_errors.add(p.code)
        return self.role.restrict(out)  # issue 18 hook: node roles (scheduler/roles.py)

    # -- loops ---------------------------------------------------------------------------
    async def listen(self) -> None:
        """LISTEN for enqueues; reconnects with backoff when the server goes away."""
        delay = 0.2
        while not self.stopping.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(self.dsn,
                                                                 autocommit=True) as conn:
                    await conn.execute("LISTEN portalq_jobs")
                    await conn.execute("LISTEN portalq_portals")
                    delay = 0.2
                    self.wake.set()  # whatever was enqueued while we were away
                    async for note in conn.notifies():
                        if note.channel == "portalq_portals":
                            await self.refresh_portals()
                        self.wake.set()
                        if self.stopping.is_set():
                            break
            except (psycopg.OperationalError, OSError) as exc:
                log.warning("listener lost the database (%s); reconnecting in %.1fs",
                            str(exc).splitlines()[0] if str(exc) else type(exc).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def claim_loop(self) -> None:
        delay = 0.2
        while not self.stopping.is_set():
            # a handler that returned frees its slot at once; its completion is written
            # by the flush loop meanwhile (the job stays held until then)
            free = self.settings.workers - (len(self.running) - self._unflushed)
            if free <= 0:
                await self._wait(None)
                continue
            try:
                if not self.portals:
                    await self.refresh_portals()
                caps = self.capacities()
                jobs: list[dict[str, Any]] = []
                if caps:
                    async with self.pool.connection() as conn:
                        jobs = await worker_api.claim(conn, worker=self.node, capacities=caps,
                                                      limit=min(free, self.settings.claim_batch))
                delay = 0.2
                self.healthy = True
            except (psycopg.OperationalError, psycopg.errors.AdminShutdown, OSError,
                    TimeoutError) as exc:
                self.healthy = False
                log.warning("claim failed (%s); retrying in %.1fs", _first_line(exc), delay)
                await self._recover()
                await self._wait(delay)
                delay = min(delay * 2, 5.0)
                continue
            now = clock.now()
            for job in jobs:
                metrics.LATENCY.labels(job["portal"]).observe(
                    max(0.0, (now - job["run_at"]).total_seconds()))
                self.running[job["id"]] = asyncio.create_task(self._execute(job))
            if len(jobs) < free:
                await self._wait(self.settings.poll_seconds)

    async def _recover(self) -> None:
        """After a lost connection: test every idle pooled connection once (one query
        each) and drop the dead ones, so the next attempts get live ones."""
        with contextlib.suppress(Exception):
            await self.pool.check()

    async def _wait(self, timeout: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.wake.wait()
        self.wake.clear()

    async def flush_loop(self) -> None:
        """Write completions in batches: whatever finished while the last write ran."""
        while True:
            await self._done_event.wait()
            self._done_event.clear()
            batch, self._done = self._done, []
            if not batch:
                if self.stopping.is_set() and not self.running:
                    return
                continue
            await self._retrying(lambda conn, b=batch: worker_api.complete_many(
                conn, worker=self.node, results=b))
            for job_id, _ in batch:
                self.running.pop(job_id, None)
            self._unflushed -= len(batch)
            self.wake.set()

    async def heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            ids = list(self.running)
            if not ids:
                continue
            try:
                async with self.pool.connection() as conn:
                    held = await worker_api.heartbeat(conn, worker=self.node, ids=ids)
            except (psycopg.OperationalError, OSError) as exc:
                log.warning("heartbeat failed: %s", _first_line(exc))
                continue
            for lost in set(ids) - held:
                task = self.running.get(lost)
                if task is not None and lost not in {d[0] for d in self._done}:
                    log.error("job %s was taken from this worker; stopping its handler", lost)
                    task.cancel()

    # -- one job -------------------------------------------------------------------------
    async def _execute(self, job: dict[str, Any]) -> None:
        extra = {"job_id": job["id"], "job_type": job["job_type"], "portal": job["portal"],
                 "attempt": job["attempts"], "order_id": job["order_id"]}
        started = time.monotonic()
        artifacts = self._artifacts_root / str(job["id"]) / f"attempt-{job['attempts']}"
        ctx = JobContext(self, job, artifacts)
        outcome = "completed"
        try:
            handler, _ = handler_for(job["job_type"], job["payload"])
            async with asyncio.timeout(self.settings.job_timeout_seconds):
                result = await handler(ctx)
            self._done.append((job["id"], dict(result) if result is not None else None))
            self._unflushed += 1
            self._done_event.set()
            self.wake.set()
            log.debug("job completed", extra=extra)
            return
        except asyncio.CancelledError:
            outcome = "released"
            raise
        except LostJob:
            outcome = "lost"
        except BaseException as exc:  # noqa: BLE001 - every failure is classified below
            outcome = await self._record_failure(job, exc, ctx, extra)
        finally:
            metrics.DURATION.labels(job["job_type"]).observe(time.monotonic() - started)
            metrics.FINISHED.labels(job["job_type"], job["portal"], outcome).inc()
            await self._save_artifacts(job, artifacts)
            if outcome != "completed":
                self.running.pop(job["id"], None)
                self.wake.set()

    async def _record_failure(self, job: dict[str, Any], exc: BaseException, ctx: JobContext,
                              extra: dict[str, Any]) -> str:
        from portals.flows.base import redact

        now = clock.now()
        message = redact(_first_line(exc) or type(exc).__name__, ctx.secrets())
        portal = self.portals.get(job["portal"])
        kw: dict[str, Any] = {"job": job, "worker": self.node, "error": message}
        outage = (isinstance(exc, PortalClosed) and exc.outage) or (
            isinstance(exc, RetryableError | TimeoutError))
        if outage:
            state = await self._retrying(lambda conn: worker_api.record_outage(
                conn, portal=job["portal"], job_id=job["id"],
                threshold=self.settings.breaker_threshold,
                probe_after=timedelta(seconds=self.settings.breaker_probe_seconds),
                reason=f"{self.settings.breaker_threshold} outage signs in a row; "
                       f"last: {message}"))
            if state.just_paused:
                log.warning("portal %s paused by the circuit breaker", job["portal"],
                            extra=extra)
            if state.paused_by is not None:
                await self.refresh_portals()
                portal = self.portals.get(job["portal"])
                # the portal is paused: this job waits for the probe, no attempt spent
                exc = PortalClosed(message, reopen_at=portal.probe_at if portal else None,
                                   outage=True)
        if isinstance(exc, PortalClosed | DeferUntil):
            when = exc.when if isinstance(exc, DeferUntil) else exc.reopen_at
            if when is None and portal is not None:
                when = calendars.next_startable(portal, now + _MIN_DEFER)
            kw.update(status="deferred", run_at=when or now + _MIN_DEFER, refund_attempt=True,
                      detail={"event": "deferred by handler", "outage": getattr(
                          exc, "outage", False)})
            metrics.DEFERRALS.labels(job["portal"]).inc()
            outcome = "deferred"
        elif isinstance(exc, BusinessError | UncertainOutcome):
            kind = "business" if isinstance(exc, BusinessError) else "uncertain"
            kw.update(status="failed", escalation=(kind, message))
            outcome = kind
        else:
            if isinstance(exc, TimeoutError):
                message = f"timed out after {self.settings.job_timeout_seconds:.0f}s"
                kw["error"] = message
            elif not isinstance(exc, RetryableError):
                message = f"{type(exc).__name__}: {message}"
                kw["error"] = message
            decision = retry.decide(attempt=job["attempts"], max_attempts=job["max_attempts"],
                                    kind="retryable", now=now,
                                    base=self.settings.retry_base_seconds,
                                    cap=self.settings.retry_cap_seconds)
            if decision.action == "retry":
                run_at = decision.run_at
                if portal is not None and run_at is not None:
                    # a backoff that lands in closed hours waits for the next opening
                    run_at = calendars.next_startable(portal, run_at) or run_at
                kw.update(status="pending", run_at=run_at)
                outcome = "retry"
            else:
                kw.update(status="failed", escalation=(
                    "attempts", f"{job['attempts']} attempts failed; last error: {message}"))
                outcome = "failed"
        log.log(logging.WARNING if outcome != "deferred" else logging.INFO,
                "job %s: %s", outcome, message, extra=extra)
        await self._retrying(lambda conn: worker_api.finish_unsuccessful(conn, **kw))
        return outcome

    async def _save_artifacts(self, job: dict[str, Any], folder: Path) -> None:
        if not folder.is_dir():
            return
        # dot-files are a tracer's partial chunks, not evidence
        files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            return

        async def record(conn: Any) -> None:
            for path in files:
                kind = "trace" if path.suffix == ".zip" else (
                    "screenshot" if path.suffix == ".png" else "file")
                await worker_api.add_artifact(conn, job_id=job["id"], attempt=job["attempts"],
                                              kind=kind, path=str(path))
        await self._retrying(record)

    async def _retrying(self, fn: Any) -> Any:
        """Run ``fn(conn)`` until the database takes it (it may be restarting)."""
        delay = 0.2
        while True:
            try:
                async with self.pool.connection() as conn:
                    return await fn(conn)
            except (psycopg.OperationalError, OSError) as exc:
                self.healthy = False
                log.warning("database write failed (%s); retrying in %.1fs",
                            _first_line(exc), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    # -- start and stop ------------------------------------------------------------------
    def start_loops(self) -> list[asyncio.Task[None]]:
        """The worker's loops: LISTEN, claim, flush completions, heartbeats."""
        return [asyncio.create_task(self.listen(), name="listen"),
                asyncio.create_task(self.claim_loop(), name="claim"),
                asyncio.create_task(self.flush_loop(), name="flush"),
                asyncio.create_task(self.heartbeat_loop(), name="heartbeat")]

    async def stop_loops(self, loops: list[asyncio.Task[None]], grace: float) -> None:
        """Graceful stop: :meth:`drain`, then end the loops (the flush loop ends by itself
        once the last completions are written)."""
        await self.drain(grace)
        for t in loops:
            if t.get_name() != "flush":
                t.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.gather(*loops, return_exceptions=True), timeout=10)

    async def drain(self, grace: float) -> None:
        """Stop claiming; give running jobs ``grace`` seconds, then release the rest."""
        self.stopping.set()
        self.wake.set()
        # issue 18 fix (tests/integration/test_rolling_restart.py): a claim in flight when
        # SIGTERM came starts its jobs after this point; they get the grace period too,
        # instead of being cancelled at once and run again elsewhere
        deadline = asyncio.get_running_loop().time() + grace
        while tasks := [t for t in self.running.values() if not t.done()]:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            log.info("waiting up to %.0fs for %d running job(s)", remaining, len(tasks))
            await asyncio.wait(tasks, timeout=remaining)
        leftover = [jid for jid, t in self.running.items() if not t.done()]
        for jid in leftover:
            self.running[jid].cancel()
        if leftover:
            await asyncio.gather(*(self.running[j] for j in leftover), return_exceptions=True)
            async with self.pool.connection() as conn:
                released = await worker_api.release(conn, worker=self.node, ids=leftover)
            log.info("released %d unfinished job(s) back to the queue", len(released))
        self._done_event.set()


_MIN_DEFER = timedelta(seconds=1)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""Workers: claim due jobs of startable portals, run their handlers, record outcomes.

One asyncio loop per process. A committed enqueue NOTIFYs ``portalq_jobs`` and wakes the
claim loop at once; a short poll catches deferred jobs coming due and missed notifications.
Completions are flushed in batches; heartbeats for all running jobs go in one statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from jobs import clock, types, worker_api
from portals.flows.browser import MISSING_EVIDENCE
from scheduler import calendars, metrics, outcomes, roles
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


def _cap_pool_reconnects(cap: float) -> None:
    """psycopg_pool re-opens lost connections with a backoff that starts at 1 s and
    doubles without bound (1, 2, 4, 8 s ...): work resumed ~5.6 s after a PostgreSQL
    restart. Its attempts are objects of one class with tunable class constants; this
    gives the pool a subclass that starts at 50 ms and never waits longer than ``cap``."""
    from psycopg_pool import base, pool_async

    class CappedAttempt(base.AttemptWithBackoff):
        INITIAL_DELAY = 0.05
        DELAY_JITTER = 0.5

        def update_delay(self, now: float) -> None:
            super().update_delay(now)
            self.delay = min(self.delay, cap)

    if getattr(pool_async, "AttemptWithBackoff", None) is base.AttemptWithBackoff:
        pool_async.AttemptWithBackoff = CappedAttempt  # type: ignore[misc]


def make_pool(settings: Settings, dsn: str) -> AsyncConnectionPool:
    """The process's connection pool (opened by the caller)."""
    _cap_pool_reconnects(settings.reconnect_cap_seconds)
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
        #: job id -> when its heartbeat was last stamped (claim or renewal), monotonic
        self._lease: dict[int, float] = {}
        self._heartbeating = False
        #: called when outbox rows (escalations, notices) may be due (set by the service)
        self.on_outbox: Any = None
        self.policy = outcomes.Policy(
            job_timeout_seconds=settings.job_timeout_seconds,
            retry_base_seconds=settings.retry_base_seconds,
            retry_cap_seconds=settings.retry_cap_seconds,
            probe_seconds=settings.breaker_probe_seconds,
            probe_limit=settings.breaker_probe_limit)
        self.role = roles.Role.of(settings)  # node roles (scheduler/roles.py)

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
        """LISTEN for enqueues, calendar changes and outbox rows; reconnects quickly (with
        jitter) when the server goes away."""
        backoff = Backoff(self.settings.reconnect_cap_seconds)
        while not self.stopping.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(self.dsn,
                                                                 autocommit=True) as conn:
                    await conn.execute("LISTEN portalq_jobs")
                    await conn.execute("LISTEN portalq_portals")
                    await conn.execute("LISTEN portalq_outbox")
                    backoff.reset()
                    self.wake.set()  # whatever was enqueued while we were away
                    if self.on_outbox is not None:
                        self.on_outbox()   # and whatever mail is due
                    async for note in conn.notifies():
                        if note.channel == "portalq_outbox":
                            if self.on_outbox is not None:
                                self.on_outbox()
                            continue
                        if note.channel == "portalq_portals":
                            await self.refresh_portals()
                        self.wake.set()
                        if self.stopping.is_set():
                            break
            except (psycopg.OperationalError, OSError) as exc:
                delay = backoff.next()
                log.warning("listener lost the database (%s); reconnecting in %.2fs",
                            str(exc).splitlines()[0] if str(exc) else type(exc).__name__, delay)
                await asyncio.sleep(delay)

    async def claim_loop(self) -> None:
        backoff = Backoff(self.settings.reconnect_cap_seconds)
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
                sent = time.monotonic()   # the claim stamps the jobs' first heartbeat
                if caps:
                    async with self.pool.connection() as conn:
                        jobs = await worker_api.claim(conn, worker=self.node, capacities=caps,
                                                      limit=min(free, self.settings.claim_batch))
                        if jobs and time.monotonic() - sent > self.fence_after / 2:
                            # a claim that took this long (held up by a partition) stamped
                            # its heartbeats long ago: others may rescue them any moment
                            log.warning("claim took %.1fs: giving its %d job(s) back",
                                        time.monotonic() - sent, len(jobs))
                            await worker_api.unclaim(conn, worker=self.node,
                                                     ids=[j["id"] for j in jobs])
                            jobs = []
                backoff.reset()
                self.healthy = True
            except (psycopg.OperationalError, psycopg.errors.AdminShutdown, OSError,
                    TimeoutError) as exc:
                self.healthy = False
                delay = backoff.next()
                log.warning("claim failed (%s); retrying in %.2fs", _first_line(exc), delay)
                await self._recover()
                await self._wait(delay)
                continue
            now = clock.now()
            for job in jobs:
                self._lease[job["id"]] = sent
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
                self._lease.pop(job_id, None)
            self._unflushed -= len(batch)
            self.wake.set()

    @property
    def fence_after(self) -> float:
        """Seconds without a renewed heartbeat after which this node stops its own flows:
        well before ``stale_after``, when another node may rescue and rerun its jobs."""
        s = self.settings
        return s.stale_after_seconds - max(s.heartbeat_seconds, s.stale_after_seconds / 4)

    async def heartbeat_loop(self) -> None:
        """Renew the heartbeats (each running job's lease) in one statement. A job whose
        lease could not be renewed for :attr:`fence_after` seconds (the database
        unreachable: a partition, an outage) has its flow stopped by this node before
        another node can rescue it, so two runs of one job never overlap; once the
        database is reachable again, late writes are refused (each checks ``lock_owner``)."""
        hb = self.settings.heartbeat_seconds
        self._heartbeating = True
        while True:
            await asyncio.sleep(hb)
            ids = list(self.running)
            if not ids:
                continue
            sent = time.monotonic()   # a lease runs from when its heartbeat was stamped
            try:
                async with asyncio.timeout(max(hb, 1.0)):
                    async with self.pool.connection() as conn:
                        held = await worker_api.heartbeat(conn, worker=self.node, ids=ids)
            except (psycopg.OperationalError, OSError, TimeoutError) as exc:
                log.warning("heartbeat failed (%s)", _first_line(exc))
                continue
            for jid in held:
                self._lease[jid] = max(self._lease.get(jid, sent), sent)
            queued = {d[0] for d in self._done}
            for lost in set(ids) - held:
                if lost not in queued:
                    self.taken_away(lost)

    async def lease_watchdog(self) -> None:
        """Fence on time, whatever the heartbeat is doing: a statement to an unreachable
        server can hang (and its cancellation take seconds) well past the stale time."""
        while True:
            await asyncio.sleep(min(self.settings.heartbeat_seconds, 0.5))
            now = time.monotonic()
            queued = {d[0] for d in self._done}
            late = {jid: now - self._lease.get(jid, now) for jid, t in self.running.items()
                    if not t.done() and jid not in queued and not getattr(t, "fenced", False)}
            victims = [jid for jid, age in late.items() if age >= self.fence_after]
            if victims:
                self.fence(victims, max(late[j] for j in victims))

    def fence(self, victims: list[int], late: float) -> None:
        """Stop these flows: this node's lease on their jobs is about to end."""
        log.error("no heartbeat renewed for %.1fs: stopping %d flow(s) before their jobs "
                  "can be rescued elsewhere (self-fencing)", late, len(victims))
        metrics.FENCED.inc(len(victims))
        for jid in victims:
            task = self.running[jid]
            task.fenced = True  # type: ignore[attr-defined]
            task.cancel()

    def lease_fresh(self, job_id: int) -> bool:
        """May this job's flow go past a point of no return now (its lease renewed
        recently enough that no other node can have rescued it)?"""
        if not self._heartbeating:   # no heartbeat loop (a worker driven by hand)
            return True
        stamped = self._lease.get(job_id)
        return stamped is not None and time.monotonic() - stamped < self.fence_after

    def taken_away(self, job_id: int) -> None:
        """The job was rescued and handed on while this worker ran it: stop its handler
        (the task frees its slot on the way out, whatever it was doing)."""
        task = self.running.get(job_id)
        if task is None:
            return
        if task.done():
            self.running.pop(job_id, None)
            return
        log.error("job %s was taken from this worker; stopping its handler", job_id)
        task.cancel()

    # -- one job -------------------------------------------------------------------------
    async def _execute(self, job: dict[str, Any]) -> None:
        extra = {"job_id": job["id"], "job_type": job["job_type"], "portal": job["portal"],
                 "attempt": job["attempts"], "order_id": job["order_id"]}
        started = time.monotonic()
        artifacts = _run_folder(self._artifacts_root / str(job["id"]), job["attempts"])
        ctx = JobContext(self, job, artifacts)
        outcome = "failed"
        queued = False   # the completion is queued: the flush loop frees the slot
        saved = False    # evidence recorded (before a failure, so its mail has it)
        try:
            handler, _ = handler_for(job["job_type"], job["payload"])
            async with asyncio.timeout(self.settings.job_timeout_seconds):
                result = await handler(ctx)
            outcome = "completed"
            self._done.append((job["id"], dict(result) if result is not None else None))
            self._unflushed += 1
            queued = True
            self._done_event.set()
            self.wake.set()
            log.debug("job completed", extra=extra)
        except asyncio.CancelledError:
            outcome = "released"
            raise
        except LostJob:
            outcome = "lost"
        except BaseException as exc:  # noqa: BLE001 - every failure is classified below
            saved = True
            await self._save_artifacts(job, artifacts)
            outcome = await self._record_failure(job, exc, ctx, extra)
        finally:
            metrics.DURATION.labels(job["job_type"]).observe(time.monotonic() - started)
            metrics.FINISHED.labels(job["job_type"], job["portal"], outcome).inc()
            if not saved:
                await self._save_artifacts(job, artifacts)
            if not queued:
                # every other way out (failure recorded, lost, released, cancelled while
                # its failure was being written) frees the slot here
                self.running.pop(job["id"], None)
                self._lease.pop(job["id"], None)
                self.wake.set()

    async def _record_failure(self, job: dict[str, Any], exc: BaseException, ctx: JobContext,
                              extra: dict[str, Any]) -> str:
        from portals.flows.base import redact

        now = clock.now()
        message = redact(_first_line(exc) or type(exc).__name__, ctx.secrets())
        portal = self.portals.get(job["portal"])
        state = worker_api.OutageState(0, None, False)
        if outcomes.is_outage_sign(exc):
            state = await self._retrying(lambda conn: worker_api.record_outage(
                conn, portal=job["portal"], job_id=job["id"],
                threshold=self.settings.breaker_threshold,
                window=timedelta(seconds=self.settings.breaker_window_seconds),
                probe_after=timedelta(seconds=self.settings.breaker_probe_seconds),
                reason=f"outage signs from {self.settings.breaker_threshold} jobs within "
                       f"{self.settings.breaker_window_seconds:.0f}s; last: {message}"))
            if state.just_paused:
                log.warning("portal %s paused by the circuit breaker", job["portal"],
                            extra=extra)
            if state.paused_by is not None:
                await self.refresh_portals()
                portal = self.portals.get(job["portal"])
        t = outcomes.decide(
            exc, job, message=message, now=now, policy=self.policy, checkpoint=ctx.checkpoints,
            reconcilable=_reconcilable(job["job_type"]),
            portal=outcomes.PortalState(
                paused_by=state.paused_by, just_paused=state.just_paused,
                probe_at=portal.probe_at if portal else None,
                next_startable=(lambda at: calendars.next_startable(portal, at))
                if portal is not None else None))
        if t.status == "deferred":
            metrics.DEFERRALS.labels(job["portal"]).inc()
        log.log(logging.WARNING if t.outcome != "deferred" else logging.INFO,
                "job %s: %s", t.outcome, t.error, extra=extra)
        await self._retrying(lambda conn: worker_api.finish_unsuccessful(
            conn, job=job, worker=self.node, status=t.status, error=t.error, run_at=t.run_at,
            refund_attempt=t.refund_attempt, escalation=t.escalation, detail=t.detail,
            probe_failed=t.probe_failed))
        return t.outcome

    async def _save_artifacts(self, job: dict[str, Any], folder: Path) -> None:
        """Record this attempt's evidence (and what is missing). Best effort: evidence never
        decides an outcome, so nothing here raises into the job's handling."""
        try:
            files, missing = _evidence_in(folder)
            if not files and not missing:
                return

            async def record(conn: Any) -> None:
                for path in files:
                    kind = "trace" if path.suffix == ".zip" else (
                        "screenshot" if path.suffix == ".png" else "file")
                    await worker_api.add_artifact(conn, job_id=job["id"],
                                                  attempt=job["attempts"], kind=kind,
                                                  path=str(path))
                for what, reason in missing:
                    await worker_api.add_artifact(conn, job_id=job["id"],
                                                  attempt=job["attempts"], kind="missing",
                                                  path=what, note=reason)
            fresh = self.lease_fresh(job["id"])
            await self._retrying(record, attempts=20 if fresh else 3)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - logged; the job's outcome stands
            log.warning("job %s: evidence not recorded: %s", job["id"], _first_line(exc))

    async def _retrying(self, fn: Any, attempts: int | None = None) -> Any:
        """Run ``fn(conn)`` until the database takes it (it may be restarting): short first
        retries with jitter, capped well under the stale time."""
        backoff = Backoff(self.settings.reconnect_cap_seconds)
        while True:
            try:
                async with self.pool.connection() as conn:
                    return await fn(conn)
            except (psycopg.OperationalError, OSError) as exc:
                self.healthy = False
                if attempts is not None:
                    attempts -= 1
                    if attempts <= 0:
                        raise
                delay = backoff.next()
                log.warning("database write failed (%s); retrying in %.2fs",
                            _first_line(exc), delay)
                await asyncio.sleep(delay)

    # -- start and stop ------------------------------------------------------------------
    def start_loops(self) -> list[asyncio.Task[None]]:
        """The worker's loops: LISTEN, claim, flush completions, heartbeats."""
        return [asyncio.create_task(self.listen(), name="listen"),
                asyncio.create_task(self.claim_loop(), name="claim"),
                asyncio.create_task(self.flush_loop(), name="flush"),
                asyncio.create_task(self.heartbeat_loop(), name="heartbeat"),
                asyncio.create_task(self.lease_watchdog(), name="watchdog")]

    async def stop_loops(self, loops: list[asyncio.Task[None]], grace: float) -> None:
        """Graceful stop: :meth:`drain`, then end the loops (the flush loop ends by itself
        once the last completions are written). A claim in flight is let finish first, so
        the jobs it took are drained like the others (not left ``running`` until rescued)."""
        self.stopping.set()
        self.wake.set()
        claim = next((t for t in loops if t.get_name() == "claim"), None)
        if claim is not None and not claim.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(claim), timeout=max(min(grace, 10), 1))
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


def _reconcilable(job_type: str) -> bool:
    try:
        return bool(types.get(job_type).reconcilable)
    except Exception:  # noqa: BLE001 - an unknown type: assume no lookup
        return False


def _run_folder(job_dir: Path, attempt: int) -> Path:
    """This run's evidence folder: ``attempt-N``, or ``attempt-N.2`` ... when attempt N ran
    before (a refunded run: a crash, a closed page, a failed probe) and left evidence."""
    folder, n = job_dir / f"attempt-{attempt}", 1
    while folder.exists():
        n += 1
        folder = job_dir / f"attempt-{attempt}.{n}"
    return folder


def _evidence_in(folder: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """An attempt folder's evidence files, and the evidence recorded as missing."""
    if not folder.is_dir():
        return [], []
    # dot-files are a tracer's partial chunks, not evidence
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
                   and p.name != MISSING_EVIDENCE)
    missing: list[tuple[str, str]] = []
    notes = folder / MISSING_EVIDENCE
    if notes.is_file():
        for line in notes.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                note = json.loads(line)
                missing.append((str(note["what"])[:200], str(note["reason"])[:500]))
    return files, missing


class Backoff:
    """Reconnect delays: short first retries (50 ms, doubling) with full jitter, capped."""

    def __init__(self, cap: float, first: float = 0.05) -> None:
        self.cap = cap
        self.first = first
        self.n = 0

    def next(self) -> float:
        ceiling = min(self.cap, self.first * 2 ** self.n)
        self.n += 1
        return ceiling / 2 + random.random() * ceiling / 2

    def reset(self) -> None:
        self.n = 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

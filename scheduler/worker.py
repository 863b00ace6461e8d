"""Workers: claim due jobs of startable portals, run their handlers, record outcomes.

One asyncio loop per process. A committed enqueue NOTIFYs ``portalq_jobs`` and wakes the
claim loop at once; a short poll catches deferred jobs coming due and missed notifications.
Completions are flushed in batches; heartbeats for all running jobs go in one statement.

This module holds the loops (listen, claim, flush, heartbeat, lease watchdog) and a job's
run; the pieces they use live apart: the connection pool (:mod:`scheduler.node_db`), the
leases (:mod:`scheduler.leases`), the browsers (:mod:`scheduler.browsers`), evidence
(:mod:`scheduler.evidence`) and failure recording (:mod:`scheduler.failures`, deciding
through the pure :mod:`scheduler.outcomes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import weakref
from collections.abc import Callable
from typing import Any

from portalq.jobs import clock, types, worker_api
from portalq.jobs.db import connections
from portalq.jobs.db.pool import Pool
from portalq.jobs.kinds import Channel
from portalq.jobs.rows import ClaimRow
from portalq.scheduler import calendar_cache, evidence, metrics, roles
from portalq.scheduler.browsers import Browsers
from portalq.scheduler.config import Settings
from portalq.scheduler.failures import FailureRecorder
from portalq.scheduler.handlers import handler_for
from portalq.scheduler.job_context import JobContext, LostJob
from portalq.scheduler.leases import Leases
from portalq.scheduler.node_db import Backoff, Database, first_line, make_pool
from portalq.scheduler.node_keys import NodeKeys

__all__ = ["Backoff", "Worker", "make_pool"]

log = logging.getLogger("portalq.worker")

#: while the claim loop keeps finding work, completions are held this long at most (or
#: until a claim's worth has finished) and written together: see flush_loop
FLUSH_HOLD_SECONDS = 0.05


class Worker:
    def __init__(self, settings: Settings, pool: Pool, dsn: str) -> None:
        self.settings = settings
        self.pool = pool
        self.dsn = dsn
        self.node = settings.node_id
        self.db = Database(pool, settings.reconnect_cap_seconds)
        self.portals: dict[str, calendar_cache.Portal] = {}
        self.running: dict[int, asyncio.Task[None]] = {}
        self.wake = asyncio.Event()
        self.stopping = asyncio.Event()
        self._done: list[tuple[int, Any]] = []
        self._busy = False   # the last claim took all it asked for: more work is waiting
        self._unflushed = 0  # finished handlers whose completion is not written yet
        self._artifacts_root = settings.artifacts()
        self._done_event = asyncio.Event()
        self._calendar_errors: set[str] = set()   # portals whose calendar raised (logged once)
        self._portals_seen = object()   # identity of the last load of self.portals
        self._urls: dict[str, str | None] = {}   # each portal's stored address
        #: (portals load, computed at, valid before, capacities): see capacities()
        self._caps: tuple[object, Any, Any, tuple[worker_api.Capacity, ...]] | None = None
        self._fenced: weakref.WeakSet[asyncio.Task[None]] = weakref.WeakSet()  # being stopped
        self.browsers = Browsers()
        self.leases = Leases(settings)
        self.failures = FailureRecorder(settings, self.db, self.node, self.portals.get,
                                        self.refresh_portals, landing=self.landing_answers)
        #: called when outbox rows (escalations, notices) may be due (set by the service)
        self.on_outbox: Callable[[], None] | None = None
        self.role = roles.Role.of(settings)  # node roles (scheduler/roles.py)
        self.keys = NodeKeys()   # sealed jobs only where this node holds the key

    @property
    def healthy(self) -> bool:
        return self.db.healthy

    async def close_browser(self) -> None:
        await self.browsers.close()

    # -- calendars ---------------------------------------------------------------------
    async def refresh_portals(self) -> None:
        async with self.pool.connection() as conn:
            fresh = await calendar_cache.load(conn)
        # in place: the failure recorder looks portals up in this very dict
        self.portals.clear()
        self.portals.update(fresh)
        self._urls = {c: p.url for c, p in fresh.items()}
        self._portals_seen = object()   # the capacities computed from the old ones are void

    async def landing_answers(self, code: str) -> bool | None:
        """Whether portal ``code``'s landing page answers (Browsers.landing_answers); None
        when it has no address to check."""
        url = self.settings.portal_urls(self._urls).get(code)
        return await self.browsers.landing_answers(code, url) if url else None

    def capacities(self) -> list[worker_api.Capacity]:
        """What a claim may take now, per startable portal. Kept until the first portal's
        capacity or day can change (:func:`calendars.stable_until`) or the portals are
        refreshed: computed per claim, it was a cost on the path from an enqueue's commit
        to its handler's start (issue 19)."""
        now = clock.now()
        cached = self._caps
        if cached is not None and cached[0] is self._portals_seen and cached[1] <= now < cached[2]:
            return list(cached[3])
        out, until = [], None
        for p in self.portals.values():
            try:
                cap = calendar_cache.capacity(p, now)
                if cap is not False:
                    out.append(worker_api.Capacity(p.code, cap, calendar_cache.portal_day(p, now)))
                end = calendar_cache.stable_until(p, now)
                until = end if until is None else min(until, end)
            except ValueError as exc:  # e.g. no holiday data for a year: that portal waits
                if p.code not in self._calendar_errors:
                    log.error("portal %s: calendar error (%s); no jobs start on it", p.code, exc)
                self._calendar_errors.add(p.code)
                until = now   # not kept: asked again on the next claim
        caps = self.role.restrict(out)  # issue 18 hook: node roles (scheduler/roles.py)
        self._caps = (self._portals_seen, now, until or now, tuple(caps))
        return list(caps)

    # -- loops ---------------------------------------------------------------------------
    async def listen(self) -> None:
        """LISTEN for enqueues, calendar changes and outbox rows; reconnects quickly (with
        jitter) when the server goes away."""
        backoff = Backoff(self.settings.reconnect_cap_seconds)
        while not self.stopping.is_set():
            try:
                async with connections.listening(self.dsn) as notifications:
                    backoff.reset()
                    self.wake.set()  # whatever was enqueued while we were away
                    if self.on_outbox is not None:
                        self.on_outbox()   # and whatever mail is due
                    async for note in notifications:
                        if note.channel == Channel.OUTBOX:
                            if self.on_outbox is not None:
                                self.on_outbox()
                            continue
                        if note.channel == Channel.PORTALS:
                            await self.refresh_portals()
                        self.wake.set()
                        if self.stopping.is_set():
                            break
            except connections.LOST as exc:
                delay = backoff.next()
                log.warning("listener lost the database (%s); reconnecting in %.2fs",
                            first_line(exc), delay)
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
                jobs: list[ClaimRow] = []
                sent = time.monotonic()   # the claim stamps the jobs' first heartbeat
                if caps:
                    key_ids = await self.keys.ids()
                    async with self.pool.connection() as conn:
                        jobs = await worker_api.claim(conn, worker=self.node, capacities=caps,
                                                      limit=min(free, self.settings.claim_batch),
                                                      key_ids=key_ids)
                        if jobs and time.monotonic() - sent > self.leases.fence_after / 2:
                            # a claim that took this long (held up by a partition) stamped
                            # its heartbeats long ago: others may rescue them any moment
                            log.warning("claim took %.1fs: giving its %d job(s) back",
                                        time.monotonic() - sent, len(jobs))
                            await worker_api.unclaim(conn, worker=self.node,
                                                     ids=[j["id"] for j in jobs])
                            jobs = []
                        jobs = await self._not_running_here(conn, jobs)
                        if len(jobs) < free:   # idle: sealed jobs left to others? (once)
                            await self.keys.tell_if_left(conn)
                backoff.reset()
                self.db.healthy = True
            except connections.LOST as exc:   # AdminShutdown and TimeoutError among them
                self.db.healthy = False
                delay = backoff.next()
                log.warning("claim failed (%s); retrying in %.2fs", first_line(exc), delay)
                await self.db.recover()
                await self._wait(delay)
                continue
            now = clock.now()
            for job in jobs:
                self.leases.claimed(job["id"], sent)
                metrics.labelled(metrics.LATENCY, job["portal"]).observe(
                    max(0.0, (now - job["run_at"]).total_seconds()))
                self.running[job["id"]] = asyncio.create_task(self._execute(job))
            busy = len(jobs) >= min(free, self.settings.claim_batch)
            if busy != self._busy:
                self._busy = busy
                self._done_event.set()   # a flush held for a busy queue goes now
            if len(jobs) < free:
                await self._wait(self.settings.poll_seconds)

    async def _not_running_here(self, conn: Any, jobs: list[ClaimRow]) -> list[ClaimRow]:
        """Never two runs of one job on this node: a job rescued from this node (its run
        fenced, still unwinding) and claimed again here is given back until that run has
        ended -- the old run's end would otherwise take the new run's slot and lease, and
        leave the new run unfenced, free to file a second time."""
        busy = [j["id"] for j in jobs if j["id"] in self.running]
        if not busy:
            return jobs
        log.warning("job(s) %s claimed again while their earlier run here is still "
                    "ending: given back", ", ".join(map(str, busy)))
        await worker_api.unclaim(conn, worker=self.node, ids=busy)
        return [j for j in jobs if j["id"] not in self.running]

    async def _wait(self, timeout: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.wake.wait()
        self.wake.clear()

    async def flush_loop(self) -> None:
        """Write completions in batches: whatever finished while the last write ran, and
        while the queue is busy, what finishes within :data:`FLUSH_HOLD_SECONDS`."""
        while True:
            await self._done_event.wait()
            self._done_event.clear()
            await self._hold_while_busy()
            batch, self._done = self._done, []
            if not batch:
                if self.stopping.is_set() and not self.running:
                    return
                continue
            await self.db.retrying(functools.partial(
                worker_api.complete_many, worker=self.node, results=batch))
            for job_id, _ in batch:
                self._free(job_id)
            self._unflushed -= len(batch)
            self.wake.set()

    async def _hold_while_busy(self) -> None:
        """While claims keep taking all they ask for, let completions gather: up to a
        claim's worth or FLUSH_HOLD_SECONDS, ended at once when the queue goes quiet or
        the worker stops. A finished handler's slot is free already (the claim loop
        counts it so), so holding its completion holds no work back; it only writes
        several claims' completions in one statement. At 10 slots the completion had been
        a statement per claim, beside the claim's own, and with a busy core beside them
        the two statements' round trips were what the drain was made of (issue 19; the
        figures are in docs/benchmarks.md). The cost: a job stays 'running' in the table up
        to FLUSH_HOLD_SECONDS after its handler returned (its lease held and renewed as
        before), and a node that dies meanwhile leaves it to the stale-heartbeat rescue,
        as it would a job finishing while its completion is being written."""
        until = time.monotonic() + FLUSH_HOLD_SECONDS
        while (self._busy and len(self._done) < self.settings.claim_batch
               and not self.stopping.is_set()):
            left = until - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._done_event.wait()
            self._done_event.clear()

    @property
    def fence_after(self) -> float:
        return self.leases.fence_after

    async def heartbeat_loop(self) -> None:
        """Renew the heartbeats (each running job's lease) in one statement. A job whose
        lease could not be renewed for ``fence_after`` seconds (the database
        unreachable: a partition, an outage) has its flow stopped by this node before
        another node can rescue it, so two runs of one job never overlap; once the
        database is reachable again, late writes are refused (each checks ``lock_owner``)."""
        hb = self.settings.heartbeat_seconds
        self.leases.renewing = True
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
            except connections.LOST as exc:   # TimeoutError among them
                log.warning("heartbeat failed (%s)", first_line(exc))
                continue
            self.leases.stamp(held, sent)
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
            late = {jid: self.leases.age(jid, now) for jid, t in self.running.items()
                    if not t.done() and jid not in queued and t not in self._fenced}
            victims = [jid for jid, age in late.items() if age >= self.leases.fence_after]
            if victims:
                self.fence(victims, max(late[j] for j in victims))

    def fence(self, victims: list[int], late: float) -> None:
        """Stop these flows: this node's lease on their jobs is about to end."""
        log.error("no heartbeat renewed for %.1fs: stopping %d flow(s) before their jobs "
                  "can be rescued elsewhere (self-fencing)", late, len(victims))
        metrics.FENCED.inc(len(victims))
        for jid in victims:
            task = self.running[jid]
            self._fenced.add(task)
            task.cancel()

    def lease_fresh(self, job_id: int) -> bool:
        return self.leases.fresh(job_id)

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

    def _free(self, job_id: int) -> None:
        self.running.pop(job_id, None)
        self.leases.drop(job_id)

    # -- one job -------------------------------------------------------------------------
    def context_for(self, job: ClaimRow) -> JobContext:
        """A job's context, built from the narrow parts it uses."""
        root, job_id, attempt = self._artifacts_root, job["id"], job["attempts"]
        return JobContext(job, lambda: evidence.run_folder(root / str(job_id), attempt),
                          pool=self.pool, node=self.node, settings=self.settings,
                          browsers=self.browsers.new_context, lease_fresh=self.leases.fresh,
                          stored_urls=self._urls)

    async def _execute(self, job: ClaimRow) -> None:
        extra = {"job_id": job["id"], "job_type": job["job_type"], "portal": job["portal"],
                 "attempt": job["attempts"], "order_id": job["order_id"]}
        started = time.monotonic()
        ctx = self.context_for(job)
        outcome = "failed"
        queued = False   # the completion is queued: the flush loop frees the slot
        saved = False    # evidence recorded (before a failure, so its mail has it)
        try:
            handler = handler_for(job["job_type"])
            async with asyncio.timeout(self.settings.job_timeout_seconds):
                result = await handler(ctx)
            outcome = "completed"
            stored, misfit = types.get(job["job_type"]).stored_result(result)
            if misfit is not None:
                log.warning("%s: stored as the flow gave it", misfit, extra=extra)
            self._done.append((job["id"], stored))
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
            await self._save_evidence(job, ctx)
            outcome = await self.failures.record(job, exc, secrets=ctx.secrets(),
                                                 checkpoint=_checkpoints(ctx), extra=extra)
        finally:
            metrics.labelled(metrics.DURATION, job["job_type"]).observe(
                time.monotonic() - started)
            metrics.labelled(metrics.FINISHED, job["job_type"], job["portal"], outcome).inc()
            if not saved:
                await self._save_evidence(job, ctx)
            if not queued:
                # every other way out (failure recorded, lost, released, cancelled while
                # its failure was being written) frees the slot here
                self._free(job["id"])
                self.wake.set()

    async def _save_evidence(self, job: ClaimRow, ctx: JobContext) -> None:
        if not ctx.artifacts_asked:
            return   # nothing asked for the folder: nothing can be in it
        try:
            await evidence.save(self.db, job, ctx.artifacts_dir,
                                lease_fresh=self.leases.fresh(job["id"]),
                                missing=ctx.evidence_missing)
        finally:
            ctx.drop_scratch()

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


def _checkpoints(ctx: JobContext) -> dict[str, Any] | None:
    """The checkpoints the run left, or None when they cannot be opened (the policy then
    reads the row's own)."""
    try:
        return ctx.checkpoints
    except Exception:  # noqa: BLE001 - a sealed checkpoint that cannot be opened
        return None

"""The claim replayed in time, per portal, with p50 or p90 durations (portals/eta/)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from datetime import timedelta
from statistics import NormalDist

from portalq.portals.eta.model import INF, Duration, Job, Snapshot, ts, words
from portalq.portals.eta.openings import Days, Openings

#: replays of the portals again as order steps are released (an order's depth, and more)
ROUNDS = 8


class Run:
    __slots__ = ("ahead", "finish", "reasons", "start", "submitted")

    def __init__(self, reasons: list[object] | None = None) -> None:
        self.start: float | None = None
        self.submitted: float | None = None
        self.finish: float | None = None
        self.ahead = 0
        #: a text, or ("opens", instant) / ("paused", probe instant) rendered at the end
        self.reasons: list[object] = reasons if reasons is not None else []


class Replay:
    """One replay of every portal's claim (p50 or p90 durations)."""

    def __init__(self, snap: Snapshot, openings: Mapping[str, Openings],
                 days: Mapping[str, Days], q: int) -> None:
        self.snap, self.openings, self.days, self.q = snap, openings, days, q
        self.now = ts(snap.now)
        self.runs: dict[int, Run] = {}
        self.slots: dict[str, list[float]] = {}
        self.started: dict[str, int] = {}
        self.used: dict[tuple[str, str, int], int] = {}
        self.dur = {k: (d.p50 if q == 50 else d.p90).total_seconds()
                    for k, d in snap.durations.items()}
        d = snap.default_duration
        self.default = (d.p50 if q == 50 else d.p90).total_seconds()
        for code in snap.portals:
            self.reset(code)

    def reset(self, code: str) -> None:
        """The portal as the snapshot has it: its sessions free when its running jobs end,
        its keys' use today (a replay of it again starts from here)."""
        p, now = self.snap.portals[code], self.now
        self.started[code] = len(p.running)
        free = now if p.paused is None else (
            ts(p.resumes_at) if p.resumes_at is not None else INF)
        slots = [max(free, now)] * p.sessions
        for end in sorted(p.running):
            if slots:
                heapq.heapreplace(slots, max(ts(end), slots[0]))
        self.slots[code] = slots
        for k in [k for k in self.used if k[0] == code]:
            del self.used[k]
        if code in self.days:
            day = self.days[code].of(now)[0]
            for (portal, key), n in self.snap.rate_used.items():
                if portal == code:
                    self.used[(portal, key, day)] = n

    def _processing(self, job: Job) -> float:
        p = job.processing
        return 0.0 if p is None else (p.p50 if self.q == 50 else p.p90).total_seconds()

    def _place(self, job: Job, due: float, run: Run) -> float | None:
        """Start ``job`` on the first slot and opening at or after ``due``, within its
        rate limit; its start (None: its portal starts nothing)."""
        portal = self.snap.portals.get(job.portal)
        slots = self.slots.get(job.portal)
        if portal is None or not slots or slots[0] == INF:
            if portal is not None and portal.paused:
                run.reasons.append(f"{portal.label} is paused ({portal.paused}) until a "
                                   "person resumes it")
            else:
                run.reasons.append(f"{job.portal} starts no job")
            return None
        t = max(due, slots[0])
        limited = job.rate_key is not None and job.rate_limit
        while True:
            opened = self.openings[job.portal].first(t)
            if opened is None:
                run.reasons.append(f"{portal.label} does not open within a year")
                return None
            if opened > t and opened > self.now:
                run.reasons.append(("opens", opened))
            t = opened
            if not limited:
                return t
            day, next_day = self.days[job.portal].of(t)
            if self.used.get((job.portal, job.rate_key or "", day), 0) < (job.rate_limit or 0):
                return t
            run.reasons.append(job.rate_words or f"{job.rate_limit} per key per portal day")
            t = next_day

    def _finish(self, job: Job, start: float, run: Run) -> None:
        if job.rate_key is not None and job.rate_limit:
            key = (job.portal, job.rate_key, self.days[job.portal].of(start)[0])
            self.used[key] = self.used.get(key, 0) + 1
        run.start = start
        run.submitted = start + self.dur.get((job.job_type, job.portal), self.default)
        run.finish = run.submitted + self._processing(job)
        heapq.heapreplace(self.slots[job.portal], run.submitted)
        run.ahead = self.started[job.portal]
        self.started[job.portal] += 1

    def queue(self, code: str, pending: list[tuple[float, int, Job]]) -> None:
        """The portal's due and scheduled jobs, in claim order as they come due.
        ``pending``: (due, id, job) sorted by due time then id (read in order; a job its
        rate limit moved to a later day goes to the small heap ``later``)."""
        now = self.now
        later: list[tuple[float, int, Job]] = []
        i, n = 0, len(pending)
        ready: list[tuple[int, float, int, Job]] = []
        opening = self.openings.get(code)
        slots = self.slots.get(code)
        runs = self.runs
        for _, jid, _ in pending:   # a replay again: its earlier runs are stale
            runs.pop(jid, None)
        # the hot path (a job with no rate limit) inlines _finish with local lookups: a
        # refresh of 100,000 jobs runs it 200,000 times
        durs = {jt: d for (jt, p), d in self.dur.items() if p == code}
        default = self.default
        proc: dict[int, float] = {}
        replace = heapq.heapreplace
        if not slots or slots[0] == INF or opening is None:
            for _, _, j in pending:
                runs[j.id] = run = Run()
                self._place(j, now, run)
            return
        # the replay's clock: a claim never goes back before the one before it (a job due
        # at 17:00 does not start at 15:00 on a session free since then)
        clock = now
        paused = self.snap.portals[code]
        probe = ("paused", paused.resumes_at) if paused.paused and paused.resumes_at else None
        while i < n or later or ready:
            t = slots[0] if slots[0] > clock else clock
            if not ready:
                nxt = min(pending[i][0] if i < n else INF, later[0][0] if later else INF)
                t = max(t, nxt)
            t = clock = opening.first(t) or INF
            while i < n and pending[i][0] <= t:
                due, jid, j = pending[i]
                i += 1
                heapq.heappush(ready, (-j.priority, due, jid, j))
            while later and later[0][0] <= t:
                due, jid, j = heapq.heappop(later)
                heapq.heappush(ready, (-j.priority, due, jid, j))
            if not ready:
                if t == INF:
                    for _, _, j in [*pending[i:], *later]:
                        runs[j.id] = Run([f"{code} does not open within a year"])
                    return
                continue
            _, due, jid, job = heapq.heappop(ready)
            found = runs.get(jid)
            if found is not None:
                run = found
            else:
                run = runs[jid] = Run()
                if probe is not None:
                    run.reasons.append(probe)
                if due > now:
                    run.reasons.append(("not before", due))
            if job.rate_key is None or not job.rate_limit:
                # t is the first opening at or after the free slot and the job's due time
                if t > due and t > slots[0] and t > now:
                    run.reasons.append(("opens", t))
                run.start = t
                run.submitted = end = t + durs.get(job.job_type, default)
                pj = job.processing
                if pj is None:
                    run.finish = end
                else:
                    k = id(pj)
                    x = proc.get(k)
                    if x is None:
                        x = proc[k] = self._processing(job)
                    run.finish = end + x
                replace(slots, end)
                run.ahead = self.started[code]
                self.started[code] += 1
                continue
            if t > due and t > slots[0] and t > now:
                run.reasons.append(("opens", t))
            start = self._place(job, t, run)
            if start is None:
                continue
            if start > t:   # moved to a later portal day: back in the queue
                heapq.heappush(later, (start, jid, job))
                continue
            self._finish(job, start, run)

    def waiting(self, job: Job) -> None:
        """Submitted: the portal decides within its declared time since the submission --
        its p50 / p90 given that it has not decided yet (a decision overdue by the declared
        p50 is not due at the next check: it is in the distribution's tail)."""
        assert job.submitted_at is not None
        since = ts(job.submitted_at)
        run = self.runs[job.id] = Run()
        run.start = run.submitted = since
        check = ts(job.next_check) if job.next_check is not None else self.now
        run.finish = max(self.now, check,
                         since + given(job.processing, self.now - since, self.q))
        portal = self.snap.portals.get(job.portal)
        run.reasons.append(f"submitted {job.submitted_at:%a %H:%M} UTC; "
                           f"{portal.label if portal else job.portal} decides within "
                           f"~{words(timedelta(seconds=self._processing(job)))} (declared)")

    def held(self, by_portal: Mapping[str, list[tuple[float, int, Job]]],
             held: list[Job]) -> None:
        """Order steps waiting for earlier ones join their portal's queue when those finish
        (their run_at is then, as the release sets it), in claim order with the jobs queued
        there: the portals are replayed again with the releases found, until none moves
        (a release depends on replays that may hold released steps themselves). A portal
        whose steps wait for another's jobs is replayed after that one, so that a refresh
        of a long backlog replays each portal about once."""
        done = {k: max(ts(v), self.now) for k, v in self.snap.done.items()}
        release: dict[int, float] = {}
        where = {j.id: j.portal for j in self.snap.jobs}
        needs: dict[str, set[str]] = {}
        for j in held:
            needs.setdefault(j.portal, set()).update(
                where[a] for a in j.after if a not in done and a in where)
        for code, found in needs.items():
            found.discard(code)
        todo = set(by_portal) | set(needs)
        for _ in range(ROUNDS + len(self.snap.portals)):
            ready = {c for c in todo if not needs.get(c, set()) & todo} or set(todo)
            todo -= ready
            for code in ready:
                extra = [(release[j.id], j.id, j) for j in held
                         if j.portal == code and j.id in release]
                if code in self.slots:
                    self.reset(code)
                self.queue(code, sorted([*by_portal.get(code, ()), *extra], key=due_order))
            for j in held:
                ends = [done[a] if a in done else (
                    self.runs[a].finish if a in self.runs else None) for a in j.after]
                at = None if None in ends else max(e for e in ends if e is not None)
                if at is not None and release.get(j.id) != at:
                    release[j.id] = at
                    todo.add(j.portal)
                elif at is None and j.id in release:
                    del release[j.id]
                    todo.add(j.portal)
            if not todo:
                break
        for j in held:
            run = self.runs.get(j.id)
            if j.id not in release or run is None:
                known = all(a in done or a in self.runs for a in j.after)
                self.runs[j.id] = Run(["held: a step before it has no estimate (failed, "
                                        "escalated or paused)" if known else
                                        "held: its earlier steps are unknown"])
            else:
                run.reasons = ["after the order's earlier steps",
                               *(r for r in run.reasons if not isinstance(r, tuple)
                                 or r[0] != "not before")]


NORMAL = NormalDist()


def given(p: Duration | None, elapsed: float, q: int) -> float:
    """The q-th percentile of a processing time that has lasted ``elapsed`` seconds: a
    log-normal through its declared p50 and p90, conditioned on being longer than that."""
    if p is None:
        return 0.0
    p50, p90 = p.p50.total_seconds(), p.p90.total_seconds()
    if p50 <= 0 or p90 <= p50 or elapsed <= 0:
        return p50 if q == 50 else p90
    sigma = math.log(p90 / p50) / NORMAL.inv_cdf(0.9)
    gone = NORMAL.cdf(math.log(elapsed / p50) / sigma)
    level = min(gone + (q / 100) * (1 - gone), 1 - 1e-9)
    return p50 * math.exp(sigma * NORMAL.inv_cdf(level))



def due_order(x: tuple[float, int, Job]) -> tuple[float, int]:
    return x[0], x[1]


__all__ = ["ROUNDS", "Replay", "Run", "due_order", "given"]

"""The claim replayed in time, per portal, with p50 or p90 durations (portals/eta/).

A refresh replays every waiting job twice (p50, p90), so the claim loop is written for
speed: a portal's jobs come in priority levels, each sorted by (due, id), so the next claim
is the head of the highest level that is due -- no heap of the whole backlog; a result is
one tuple per job, and the opening a claim falls in is looked up again only past its end.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from operator import itemgetter

from portalq.portals.eta.model import INF, Checks, Duration, Job, PortalState, Snapshot, ts
from portalq.portals.eta.openings import Days, Openings

#: (start, submitted, finish, jobs of its portal that start before it); None: no estimate
Out = tuple[float | None, float | None, float | None, int]
NONE: Out = (None, None, None, 0)

#: (due, id, job): a job queued on its portal
Entry = tuple[float, int, Job]
#: a portal's queued jobs: one list per priority, the highest first, each by (due, id)
Levels = list[list[Entry]]
due_order = itemgetter(0, 1)
by_due = itemgetter(0)


def levels(entries: Iterable[Entry]) -> Levels:
    """``entries`` in claim order's levels."""
    by: dict[int, list[Entry]] = {}
    for e in entries:
        by.setdefault(e[2].priority, []).append(e)
    out = []
    for prio in sorted(by, reverse=True):
        found = by[prio]
        found.sort(key=due_order)
        out.append(found)
    return out


class Replay:
    """One replay of every portal's claim (p50 or p90 durations)."""

    def __init__(self, snap: Snapshot, openings: Mapping[str, Openings],
                 days: Mapping[str, Days], q: int,
                 lookups: dict[str, Openings] | None = None) -> None:
        self.snap, self.openings, self.days, self.q = snap, openings, days, q
        #: per portal, when its lookups can run (:meth:`looked`), listed on first use
        self.lookups = {} if lookups is None else lookups
        self.now = ts(snap.now)
        #: job id -> its run; job id -> why it starts when it does, if anything besides
        #: its portal's probe and its run_at (:func:`claimed`): a text or ("opens", instant)
        self.out: dict[int, Out] = {}
        self.why: dict[int, list[object]] = {}
        self.slots: dict[str, list[float]] = {}
        self.started: dict[str, int] = {}
        self.used: dict[tuple[str, str, int], int] = {}
        self.replayed: set[str] = set()
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

    def processing(self, job: Job) -> float:
        p = job.processing
        return 0.0 if p is None else (p.p50 if self.q == 50 else p.p90).total_seconds()

    def _hours(self, code: str) -> Openings | None:
        """When the portal's lookups can run: its own calendar, its steps' hours aside."""
        found = self.lookups.get(code)
        if found is None:
            portal = self.snap.portals.get(code)
            if portal is None:
                return None
            found = self.lookups[code] = Openings(portal, self.snap.now, steps=False)
        return found

    def looked(self, code: str, t: float) -> float:
        """When a check due at ``t`` runs: a lookup is a job of the portal, so one falling
        in its closed hours runs at its next opening (the tick defers it there)."""
        hours = self._hours(code)
        at = hours.first(t) if hours is not None else None
        return t if at is None else at

    def checked(self, code: str, checks: Checks, at: float, gap: float,
                decided: float) -> float:
        """When a decision made at ``decided`` is seen, the next check running at ``at``
        and the one after it ``gap`` later: the checks as the service runs them -- each one
        that sees nothing sets the next at its own time plus the grown gap
        (jobs.waiting), and one falling in closed hours runs at the opening -- so after a
        night the checks start again from the morning's opening. At the cap, a day's
        checks are counted at once, not walked."""
        hours = self._hours(code)
        # a second at least: a test's check interval of 0 must not divide by it
        gap = max(gap, 1.0)
        # no back-off: every gap is the first
        cap = max(checks.cap.total_seconds(), 1.0) if checks.backoff > 1 else gap
        at = self.looked(code, at)
        for _ in range(10_000):   # bounded: a decision past a year is never reached
            if at >= decided:
                return at
            if gap < cap:
                gap = min(gap * checks.backoff, cap)
                at = self.looked(code, at + gap)
                continue
            found = hours.span(at) if hours is not None else None
            last = found[1] if found is not None else INF
            k = math.ceil((decided - at) / gap)
            if at + k * gap <= last:
                return at + k * gap
            at = self.looked(code, at + (math.floor((last - at) / gap) + 1) * gap)
        return at

    def _claimer(self, code: str) -> Callable[[int, Job, float, int], None]:
        """``claim(jid, job, t, n)``: the portal's ``n``-th job started at ``t`` on its
        freest session -- its run's end, its decision seen (a submission the portal
        decides later), that session busy until the run ends."""
        out, slots, default = self.out, self.slots[code], self.default
        durs = {jt: d for (jt, p), d in self.dur.items() if p == code}
        replace = heapq.heapreplace

        def claim(jid: int, job: Job, t: float, n: int) -> None:
            end = t + durs.get(job.job_type, default)
            out[jid] = (t, end, self.seen(code, job.processing, job.checks, end), n)
            replace(slots, end)
        return claim

    def seen(self, code: str, processing: Duration | None, checks: Checks | None,
             end: float) -> float:
        """When the decision on a submission made at ``end`` is seen: the portal's
        processing (this replay's quantile), then its checks in its hours (a run that
        leaves nothing to decide: its end)."""
        if processing is None:
            return end
        decided = end + (processing.p50 if self.q == 50 else processing.p90).total_seconds()
        if checks is None:
            return self.looked(code, decided)
        every = checks.every.total_seconds()
        return self.checked(code, checks, end + every, every, decided)

    def running(self) -> dict[int, float]:
        """The running jobs (the snapshot's): when each one's decision is seen."""
        return {jid: self.seen(r.portal, r.processing, r.checks, max(ts(r.end), self.now))
                for jid, r in self.snap.running.items()}

    def queue(self, code: str, queued: Sequence[list[Entry]]) -> None:
        """The portal's due and scheduled jobs (``queued``: :func:`levels`), claimed as they
        come due: at each claim, the first instant a session is free, the portal can start
        a job and one is due, never before the claim before it; then the highest priority
        due, the earliest due, the lowest id. A job its rate limit moves to a later portal
        day is queued again at that day's opening (``later``, a small heap per level)."""
        out, why, now = self.out, self.why, self.now
        if code in self.replayed:   # a replay again: its reasons are stale
            for lv in queued:
                for e in lv:
                    why.pop(e[1], None)
        self.replayed.add(code)
        portal = self.snap.portals.get(code)
        opening = self.openings.get(code)
        slots = self.slots.get(code)
        if portal is None or opening is None or not slots or slots[0] == INF:
            reason = (f"{portal.label} is paused ({portal.paused}) until a person resumes "
                      "it" if portal is not None and portal.paused else f"{code} starts no job")
            for lv in queued:
                for e in lv:
                    out[e[1]] = NONE
                    why[e[1]] = [reason]
            return
        if not queued:
            return
        claim = self._claimer(code)
        span = opening.span
        started = self.started[code]
        rng = range(len(queued))
        pos = [0] * len(queued)
        size = [len(lv) for lv in queued]
        limits = code in self.days   # a portal none of whose jobs has a rate limit: no check
        head = [lv[0][0] if lv else INF for lv in queued]   # the due of each level's head
        later: list[list[Entry]] = [[] for _ in queued]
        clock, hi = now, -INF
        # once every job left is due, the rest go in claim order as listed (``drain``)
        last_due = INF if limits else max(lv[-1][0] for lv in queued if lv)
        while clock < last_due:
            t = slots[0]
            if t < clock:
                t = clock
            if t > hi:
                found = span(t)
                if found is None:
                    break
                t, hi = found
            for k in rng:
                if head[k] <= t:
                    break
            else:   # none due yet: the next one due, at an opening
                t = min(head)
                if t == INF:
                    break
                if t > hi:
                    found = span(t)
                    if found is None:
                        break
                    t, hi = found
                for k in rng:
                    if head[k] <= t:
                        break
            clock = t
            lv, wait, p = queued[k], later[k], pos[k]
            if wait and (p >= size[k] or wait[0] < lv[p]):
                due, jid, job = heapq.heappop(wait)
            else:
                due, jid, job = lv[p]
                pos[k] = p = p + 1
            nxt = lv[p][0] if p < size[k] else INF
            head[k] = wait[0][0] if wait and wait[0][0] < nxt else nxt
            if t > due and t > slots[0] and t > now:
                why.setdefault(jid, []).append(("opens", t))
            if limits and job.rate_key is not None and job.rate_limit:
                start = self._within_limit(code, job, t, opening)
                if start is None:
                    out[jid] = NONE
                    why.setdefault(jid, []).append(f"{portal.label} does not open within a year")
                    continue
                if start > t:   # moved to a later portal day: queued again then
                    heapq.heappush(wait, (start, jid, job))
                    if start < head[k]:
                        head[k] = start
                    continue
            claim(jid, job, t, started)
            started += 1
        else:
            self.started[code] = started
            self._drain(code, queued, pos, clock, hi)
            return
        # every job claimed, or the portal opens no more within LOOK_AHEAD: any left have
        # no estimate
        for k in rng:
            for _, jid, _ in [*queued[k][pos[k]:], *later[k]]:
                out[jid] = NONE
                why.setdefault(jid, []).append(f"{portal.label} does not open within a year")
        self.started[code] = started

    def _drain(self, code: str, queued: Sequence[list[Entry]], pos: list[int], clock: float,
               hi: float) -> None:
        """Claim the rest of a portal's jobs, every one of them due (none rate-limited):
        level by level as listed, each at the first opening a session is free in."""
        out, why, now = self.out, self.why, self.now
        slots, span = self.slots[code], self.openings[code].span
        claim = self._claimer(code)
        started = self.started[code]
        for k, lv in enumerate(queued):
            rest = islice(lv, pos[k], None)
            for due, jid, job in rest:
                t = slots[0]
                if t < clock:
                    t = clock
                if t > hi:
                    found = span(t)
                    if found is None:   # no opening within LOOK_AHEAD: the rest have none
                        label = self.snap.portals[code].label
                        for e in [(due, jid, job), *rest, *(e for lv2 in queued[k + 1:]
                                                            for e in lv2)]:
                            out[e[1]] = NONE
                            why.setdefault(e[1], []).append(
                                f"{label} does not open within a year")
                        self.started[code] = started
                        return
                    t, hi = found
                if t > due and t > slots[0] and t > now:
                    why.setdefault(jid, []).append(("opens", t))
                clock = t
                claim(jid, job, t, started)
                started += 1
        self.started[code] = started

    def _within_limit(self, code: str, job: Job, t: float, opening: Openings) -> float | None:
        """The first opening at or after ``t`` on a portal day whose use of the job's key
        is under its limit, counting the job in if that is ``t``'s day (None: none within
        LOOK_AHEAD)."""
        days, key, limit = self.days[code], job.rate_key or "", job.rate_limit or 0
        at: float | None = t
        while at is not None:
            day, next_day = days.of(at)
            n = self.used.get((code, key, day), 0)
            if n < limit:
                if at == t:
                    self.used[(code, key, day)] = n + 1
                return at
            self.why.setdefault(job.id, []).append(
                job.rate_words or f"{job.rate_limit} per key per portal day")
            at = opening.first(next_day)
            if at is not None and at > next_day and at > self.now:
                self.why[job.id].append(("opens", at))
        return None


def claimed(portal: PortalState | None) -> bool:
    """Whether the replay claims the portal's jobs (they have an estimate unless it opens no
    more), or none starts (none, or paused until a person resumes it)."""
    return portal is not None and portal.sessions > 0 and not (
        portal.paused and portal.resumes_at is None)


def probe(portal: PortalState | None) -> list[object]:
    """The reason a claimed job of a paused portal waits for its probe, if it does."""
    if portal is None or not claimed(portal) or not portal.paused:
        return []
    return [("paused", portal.resumes_at)]


__all__ = ["NONE", "Entry", "Levels", "Out", "Replay", "by_due", "claimed", "due_order",
           "levels", "probe"]

"""When will it be done? A job's and an order's start and finish, p50 and p90 (issue 41).

A pure function of a :class:`Snapshot` -- calendars, the queue, limits, durations, now --
so tests drive it with synthetic inputs and a frozen instant; the loader (scheduler/estimates.py)
builds the snapshot from the database.

What it models, per portal, by replaying the claim in time:

- the claim order: among due jobs, priority first, then run_at, then id (jobs/db/sql/
  queries.sql ``claim``); a job due later joins when it comes due;
- concurrency: the portal's sessions (its ``max_concurrent_sessions``, at most the workers'
  capacity), the running jobs holding theirs until their expected end;
- the calendar: a job starts only when the portal can start one (hours, holidays,
  closures, the cut-off before closing) and every step calendar of that portal is open
  (PayBC's hours for BC: portals/steps.py);
- per-key rate limits: a key's jobs past its limit for the portal's day move to the next
  portal day (one EIN per responsible party per IRS day), as the claim defers them;
- run durations per (job type, portal): measured p50 / p90, or a default;
- the portal's own processing after a submission (a registry examining a filing): the
  declared p50 / p90 after the run; a job already waiting on the portal finishes when its
  declared time since the submission is up, at the earliest at its next check;
- an order's held steps: released when every step before them finishes, then queued
  behind the backlog their portal has then.

The p50 replay uses median durations, the p90 replay the p90 ones (for every job ahead
too, so for a long backlog the p90 is on the safe side). Not modelled: failures and
retries, escalations waiting for a person, portal outages to come, jobs enqueued later
with a higher priority, other nodes' workers beyond ``sessions``.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from statistics import NormalDist
from typing import Any

from portalq.portals.calendar import PortalCalendar, closes_at, next_start, zone

#: the openings are listed this far ahead at a time, as the replay needs them
HORIZON = timedelta(days=60)
#: beyond it a job has no estimate ("does not open within a year")
LOOK_AHEAD = timedelta(days=366)
_FAR = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Duration:
    p50: timedelta
    p90: timedelta
    #: finished runs it was measured from (0: a default)
    measured: int = 0


@dataclass(frozen=True)
class PortalState:
    calendar: PortalCalendar
    #: jobs it runs at once (0: none start)
    sessions: int
    #: display name ("IRS EIN Assistant"); default: the calendar's code
    name: str = ""
    #: why no job starts on it until a person resumes it (None: not paused)
    paused: str | None = None
    #: when a paused portal is tried again (a breaker's probe); None: by a person only
    resumes_at: datetime | None = None
    #: calendars of steps every job of the portal reaches (a payment page's own hours)
    steps: tuple[PortalCalendar, ...] = ()
    #: expected ends of the jobs running on it now
    running: tuple[datetime, ...] = ()

    @property
    def label(self) -> str:
        return self.name or self.calendar.code


@dataclass(frozen=True)
class Job:
    id: int
    job_type: str
    portal: str
    priority: int = 0
    run_at: datetime | None = None
    #: per-key limit: the key and how many a portal day
    rate_key: str | None = None
    rate_limit: int | None = None
    #: what the limit is in words ("one per responsible party per business day")
    rate_words: str = ""
    #: the portal's own processing after the submission (declared p50 / p90)
    processing: Duration | None = None
    #: submitted, waiting for the portal's decision: since when, and the next check
    submitted_at: datetime | None = None
    next_check: datetime | None = None
    #: a held order step: the job ids it waits for
    after: tuple[int, ...] = ()
    #: what the job is, for people ("EIN", "filing")
    label: str = ""


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    portals: Mapping[str, PortalState]
    jobs: Sequence[Job]
    #: (job type, portal) -> run duration
    durations: Mapping[tuple[str, str], Duration] = field(default_factory=dict)
    default_duration: Duration = Duration(timedelta(minutes=3), timedelta(minutes=10))
    #: (portal, rate key) -> jobs of that key started on the portal's current day
    rate_used: Mapping[tuple[str, str], int] = field(default_factory=dict)
    #: job id -> when it completed (an order step's finished predecessors)
    done: Mapping[int, datetime] = field(default_factory=dict)


@dataclass(frozen=True)
class Estimate:
    job_id: int
    #: None: no estimate (a paused portal, a step held by a failed one, nothing opens)
    start50: datetime | None
    start90: datetime | None
    #: the run's end (the submission, for a registry that decides later)
    submitted50: datetime | None
    submitted90: datetime | None
    #: done, the portal's processing included
    finish50: datetime | None
    finish90: datetime | None
    #: jobs of its portal that start before it
    ahead: int = 0
    #: why it starts when it does
    reasons: tuple[str, ...] = ()
    #: what follows the run (the portal's declared processing), if anything
    then: str = ""


# The replay works on POSIX seconds (floats): comparing and adding them costs a fraction
# of what datetimes do, and a refresh compares a few per job.
_INF = float("inf")
#: replays of the portals again as order steps are released (an order's depth, and more)
_ROUNDS = 8


def _ts(t: datetime) -> float:
    return t.timestamp()


def _dt(x: float | None) -> datetime | None:
    return None if x is None or x == _INF else datetime.fromtimestamp(x, UTC)


class _Openings:
    """The instants a portal can start a job: a sorted list of [start, last start], listed
    HORIZON at a time as the replay reaches further."""

    def __init__(self, portal: PortalState, now: datetime) -> None:
        self.cals = (portal.calendar, *portal.steps)
        self.until = now
        self.limit = _ts(now + LOOK_AHEAD)
        self.starts: list[float] = []
        self.ends: list[float] = []
        self._extend()

    def _extend(self) -> None:
        lo, hi = self.until, self.until + HORIZON
        spans = _spans(self.cals[0], lo, hi)
        for cal in self.cals[1:]:
            spans = _intersect(spans, _spans(cal, lo, hi))
        for a, b in spans:
            if self.ends and a <= self.ends[-1]:   # a period running across the seam
                self.ends[-1] = max(self.ends[-1], b)
            else:
                self.starts.append(a)
                self.ends.append(b)
        self.until = hi

    def first(self, t: float) -> float | None:
        """The first instant >= t a job can start (None: none within LOOK_AHEAD)."""
        while True:
            i = bisect_right(self.starts, t) - 1
            if i >= 0 and t <= self.ends[i]:
                return t
            if i + 1 < len(self.starts):
                return self.starts[i + 1]
            if _ts(self.until) >= self.limit:
                return None
            self._extend()


def _spans(cal: PortalCalendar, now: datetime, until: datetime) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    cut = timedelta(minutes=cal.cutoff_minutes)
    t: datetime | None = now
    while t is not None and t < until:
        s = next_start(cal, t)
        if s is None or s >= until:
            break
        end = closes_at(cal, s)
        if end is None:
            out.append((_ts(s), _INF))
            break
        out.append((_ts(s), _ts(end - cut)))
        t = end
    return out


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]],
               ) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


class _Days:
    """A portal's local days as [start, next start) in POSIX seconds (its rate limits
    count per portal day)."""

    def __init__(self, cal: PortalCalendar, now: datetime) -> None:
        tz = zone(cal.timezone)
        d = now.astimezone(tz).date() - timedelta(days=1)
        self.starts = [_ts(datetime.combine(d + timedelta(days=i), time(0), tz))
                       for i in range(LOOK_AHEAD.days + 4)]

    def of(self, t: float) -> tuple[int, float]:
        """(the day's number, the next day's start)."""
        i = bisect_right(self.starts, t) - 1
        return i, self.starts[i + 1] if i + 1 < len(self.starts) else _INF


class _Run:
    __slots__ = ("ahead", "finish", "reasons", "start", "submitted")

    def __init__(self, reasons: list[object] | None = None) -> None:
        self.start: float | None = None
        self.submitted: float | None = None
        self.finish: float | None = None
        self.ahead = 0
        #: a text, or ("opens", instant) / ("paused", probe instant) rendered at the end
        self.reasons: list[object] = reasons if reasons is not None else []


class _Replay:
    """One replay of every portal's claim (p50 or p90 durations)."""

    def __init__(self, snap: Snapshot, openings: Mapping[str, _Openings],
                 days: Mapping[str, _Days], q: int) -> None:
        self.snap, self.openings, self.days, self.q = snap, openings, days, q
        self.now = _ts(snap.now)
        self.runs: dict[int, _Run] = {}
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
            _ts(p.resumes_at) if p.resumes_at is not None else _INF)
        slots = [max(free, now)] * p.sessions
        for end in sorted(p.running):
            if slots:
                heapq.heapreplace(slots, max(_ts(end), slots[0]))
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

    def _place(self, job: Job, due: float, run: _Run) -> float | None:
        """Start ``job`` on the first slot and opening at or after ``due``, within its
        rate limit; its start (None: its portal starts nothing)."""
        portal = self.snap.portals.get(job.portal)
        slots = self.slots.get(job.portal)
        if portal is None or not slots or slots[0] == _INF:
            if portal is not None and portal.paused:
                run.reasons.append(f"{portal.label} is paused ({portal.paused}) until a "
                                   "person resumes it")
            else:
                run.reasons.append(f"{job.portal} starts no job")
            return None
        if portal.paused and portal.resumes_at is not None:
            run.reasons.append(("paused", portal.resumes_at))
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

    def _finish(self, job: Job, start: float, run: _Run) -> None:
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
        if not slots or slots[0] == _INF or opening is None:
            for _, _, j in pending:
                runs[j.id] = run = _Run()
                self._place(j, now, run)
            return
        while i < n or later or ready:
            t = slots[0]
            if not ready:
                nxt = min(pending[i][0] if i < n else _INF, later[0][0] if later else _INF)
                t = max(t, nxt)
            t = opening.first(t if t > now else now) or _INF
            while i < n and pending[i][0] <= t:
                due, jid, j = pending[i]
                i += 1
                heapq.heappush(ready, (-j.priority, due, jid, j))
            while later and later[0][0] <= t:
                due, jid, j = heapq.heappop(later)
                heapq.heappush(ready, (-j.priority, due, jid, j))
            if not ready:
                if t == _INF:
                    for _, _, j in [*pending[i:], *later]:
                        runs[j.id] = _Run([f"{code} does not open within a year"])
                    return
                continue
            _, due, jid, job = heapq.heappop(ready)
            found = runs.get(jid)
            if found is not None:
                run = found
            else:
                run = runs[jid] = _Run()
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
            start = self._place(job, max(due, now), run)
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
        since = _ts(job.submitted_at)
        run = self.runs[job.id] = _Run()
        run.start = run.submitted = since
        check = _ts(job.next_check) if job.next_check is not None else self.now
        run.finish = max(self.now, check,
                         since + _given(job.processing, self.now - since, self.q))
        portal = self.snap.portals.get(job.portal)
        run.reasons.append(f"submitted {job.submitted_at:%a %H:%M} UTC; "
                           f"{portal.label if portal else job.portal} decides within "
                           f"~{_words(timedelta(seconds=self._processing(job)))} (declared)")

    def held(self, by_portal: Mapping[str, list[tuple[float, int, Job]]],
             held: list[Job]) -> None:
        """Order steps waiting for earlier ones join their portal's queue when those finish
        (their run_at is then, as the release sets it), in claim order with the jobs queued
        there: the portals are replayed again with the releases found, until none moves
        (a release depends on replays that may hold released steps themselves). A portal
        whose steps wait for another's jobs is replayed after that one, so that a refresh
        of a long backlog replays each portal about once."""
        done = {k: max(_ts(v), self.now) for k, v in self.snap.done.items()}
        release: dict[int, float] = {}
        where = {j.id: j.portal for j in self.snap.jobs}
        needs: dict[str, set[str]] = {}
        for j in held:
            needs.setdefault(j.portal, set()).update(
                where[a] for a in j.after if a not in done and a in where)
        for code, found in needs.items():
            found.discard(code)
        todo = set(by_portal) | set(needs)
        for _ in range(_ROUNDS + len(self.snap.portals)):
            ready = {c for c in todo if not needs.get(c, set()) & todo} or set(todo)
            todo -= ready
            for code in ready:
                extra = [(release[j.id], j.id, j) for j in held
                         if j.portal == code and j.id in release]
                if code in self.slots:
                    self.reset(code)
                self.queue(code, sorted([*by_portal.get(code, ()), *extra], key=_due_order))
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
                self.runs[j.id] = _Run(["held: a step before it has no estimate (failed, "
                                        "escalated or paused)" if known else
                                        "held: its earlier steps are unknown"])
            else:
                run.reasons = ["after the order's earlier steps",
                               *(r for r in run.reasons if not isinstance(r, tuple)
                                 or r[0] != "not before")]


_NORMAL = NormalDist()


def _given(p: Duration | None, elapsed: float, q: int) -> float:
    """The q-th percentile of a processing time that has lasted ``elapsed`` seconds: a
    log-normal through its declared p50 and p90, conditioned on being longer than that."""
    if p is None:
        return 0.0
    p50, p90 = p.p50.total_seconds(), p.p90.total_seconds()
    if p50 <= 0 or p90 <= p50 or elapsed <= 0:
        return p50 if q == 50 else p90
    sigma = math.log(p90 / p50) / _NORMAL.inv_cdf(0.9)
    gone = _NORMAL.cdf(math.log(elapsed / p50) / sigma)
    level = min(gone + (q / 100) * (1 - gone), 1 - 1e-9)
    return p50 * math.exp(sigma * _NORMAL.inv_cdf(level))


def _words(d: timedelta) -> str:
    h = d.total_seconds() / 3600
    if h >= 48:
        return f"{h / 24:.0f} days"
    return f"{h:.0f} h" if h >= 1 else f"{d.total_seconds() / 60:.0f} min"


def _render(reason: object, portal: PortalState | None) -> str:
    if isinstance(reason, str):
        return reason
    assert isinstance(reason, tuple)
    kind: str = reason[0]
    at: Any = reason[1]
    label = portal.label if portal is not None else "the portal"
    if kind == "opens" and portal is not None:
        local = datetime.fromtimestamp(at, zone(portal.calendar.timezone))
        return f"{label} opens {local:%a %H:%M %Z}"
    if kind == "not before":
        return f"not before {datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M} UTC"
    return f"{label} is paused ({portal.paused if portal else ''}), tried again {at:%a %H:%M} UTC"


def _due_order(x: tuple[float, int, Job]) -> tuple[float, int]:
    return x[0], x[1]


def estimate(snap: Snapshot) -> Estimates:
    """Every job's estimate, by job id."""
    openings = {code: _Openings(p, snap.now) for code, p in snap.portals.items()
                if p.sessions > 0}
    limited = {j.portal for j in snap.jobs if j.rate_key is not None and j.rate_limit}
    days = {code: _Days(snap.portals[code].calendar, snap.now)
            for code in limited if code in snap.portals}
    now = _ts(snap.now)
    by_portal: dict[str, list[tuple[float, int, Job]]] = {}
    held, waiting = [], []
    for j in snap.jobs:
        if j.after:
            held.append(j)
        elif j.submitted_at is not None:
            waiting.append(j)
        else:
            by_portal.setdefault(j.portal, []).append(
                (j.run_at.timestamp() if j.run_at is not None else now, j.id, j))
    for pending in by_portal.values():
        pending.sort(key=_due_order)
    replays = []
    for q in (50, 90):
        r = _Replay(snap, openings, days, q)
        for j in waiting:
            r.waiting(j)
        r.held(by_portal, held)
        replays.append(r)
    return Estimates(snap, *replays)


class Estimates(Mapping[int, Estimate]):
    """Every job's estimate by id, each made into an :class:`Estimate` (its datetimes and
    reasons in words) when first read: a view showing ten of 100,000 pays for ten."""

    def __init__(self, snap: Snapshot, r50: _Replay, r90: _Replay) -> None:
        self._snap, self._r50, self._r90 = snap, r50, r90
        self._jobs = {j.id: j for j in snap.jobs}
        self._made: dict[int, Estimate] = {}

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[int]:
        return iter(self._jobs)

    def __getitem__(self, job_id: int) -> Estimate:
        made = self._made.get(job_id)
        if made is None:
            made = self._made[job_id] = self._make(self._jobs[job_id])
        return made

    def finishes(self, job_id: int) -> tuple[float, float] | None:
        """The p50 and p90 finish in POSIX seconds, without making the estimate (None:
        no estimate)."""
        a, b = self._r50.runs[job_id].finish, self._r90.runs[job_id].finish
        return None if a is None or b is None else (a, max(a, b))

    def _make(self, j: Job) -> Estimate:
        a, b = self._r50.runs[j.id], self._r90.runs[j.id]
        portal = self._snap.portals.get(j.portal)
        label = portal.label if portal else j.portal
        reasons = [_render(x, portal) for x in dict.fromkeys(a.reasons)]
        if a.ahead and j.submitted_at is None:
            reasons.append(f"{a.ahead} job(s) ahead on {label}, "
                           f"{portal.sessions if portal else 0} at a time")
        then = ""
        if j.processing is not None and j.submitted_at is None:
            then = f"then {label} decides within ~{_words(j.processing.p50)} (declared)"
        f90 = b.finish if b.finish is None or a.finish is None else max(a.finish, b.finish)
        return Estimate(j.id, _dt(a.start), _dt(b.start), _dt(a.submitted), _dt(b.submitted),
                        _dt(a.finish), _dt(f90), a.ahead, tuple(reasons), then)


def text(job: Job, est: Estimate, tz: str) -> str:
    """'EIN expected Tue 09:40 EST (by 11:15 at the latest): <reasons>'."""
    what = job.label or job.job_type
    if est.finish50 is None or est.finish90 is None:
        return f"{what}: no estimate: " + ("; ".join(est.reasons) or "unknown")
    z = zone(tz)
    a, b = est.finish50.astimezone(z), est.finish90.astimezone(z)
    latest = f"{b:%H:%M}" if a.date() == b.date() else f"{b:%a %d %b %H:%M}"
    out = f"{what} expected {a:%a %d %b %H:%M %Z} (by {latest} at the latest)"
    why = [*est.reasons, est.then] if est.then else list(est.reasons)
    return out + (": " + ", ".join(why) if why else "")


__all__ = ["HORIZON", "Duration", "Estimate", "Estimates", "Job", "PortalState", "Snapshot",
           "estimate", "text"]

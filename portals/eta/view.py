"""The estimator's entry point: every job's estimate from a snapshot, made into words
when read (portals/eta/)."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from portalq.portals.calendar import zone
from portalq.portals.eta.decisions import waiting as decision
from portalq.portals.eta.model import Estimate, Job, PortalState, Snapshot, dt, ts, words
from portalq.portals.eta.openings import Days, Openings
from portalq.portals.eta.orders import release
from portalq.portals.eta.replay import Entry, Levels, Replay, by_due, claimed, due_order, probe


def render(reason: object, portal: PortalState | None) -> str:
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


def estimate(snap: Snapshot) -> Estimates:
    """Every job's estimate, by job id."""
    # a refresh makes a few hundred thousand short-lived tuples and no reference cycle:
    # the cyclic collector walking the whole heap meanwhile cost a fifth of a refresh of
    # 100,000 jobs (bench/eta_bench.py), so it waits until the refresh is done
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _estimate(snap)
    finally:
        if collecting:
            gc.enable()


def _estimate(snap: Snapshot) -> Estimates:
    openings = {code: Openings(p, snap.now) for code, p in snap.portals.items()
                if p.sessions > 0}
    limited = {j.portal for j in snap.jobs if j.rate_key is not None and j.rate_limit}
    days = {code: Days(snap.portals[code].calendar, snap.now)
            for code in limited if code in snap.portals}
    now = ts(snap.now)
    by_level: dict[tuple[str, int], list[Entry]] = {}
    held, waiting = [], []
    last, ascending = -1, True
    for j in snap.jobs:
        if j.after:
            held.append(j)
        elif j.submitted_at is not None:
            waiting.append(j)
        else:
            if j.id < last:
                ascending = False
            last = j.id
            by_level.setdefault((j.portal, j.priority), []).append(
                (j.run_at.timestamp() if j.run_at is not None else now, j.id, j))
    queued: dict[str, Levels] = {}
    for (code, _), found in sorted(by_level.items(), key=lambda x: -x[0][1]):
        # a stable sort by due keeps jobs listed by id in id order (a third of the work)
        found.sort(key=by_due if ascending else due_order)
        queued.setdefault(code, []).append(found)
    replays = []
    lookups: dict[str, Openings] = {}
    for q in (50, 90):
        r = Replay(snap, openings, days, q, lookups)
        for j in waiting:
            decision(r, j)
        release(r, queued, held)
        replays.append(r)
    return Estimates(snap, *replays)


class Estimates(Mapping[int, Estimate]):
    """Every job's estimate by id, each made into an :class:`Estimate` (its datetimes and
    reasons in words) when first read: a view showing ten of 100,000 pays for ten."""

    def __init__(self, snap: Snapshot, r50: Replay, r90: Replay) -> None:
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
        a, b = self._r50.out[job_id][2], self._r90.out[job_id][2]
        return None if a is None or b is None else (a, max(a, b))

    def running(self) -> dict[int, tuple[datetime, datetime]]:
        """The snapshot's running jobs: when each one's decision is seen (p50, p90)."""
        r50, r90 = self._r50.running(), self._r90.running()
        return {jid: (at50, max(at50, at90)) for jid in r50
                if (at50 := dt(r50[jid])) is not None and (at90 := dt(r90[jid])) is not None}

    def _make(self, j: Job) -> Estimate:
        s50, u50, f50, ahead = self._r50.out[j.id]
        s90, u90, f90, _ = self._r90.out[j.id]
        portal = self._snap.portals.get(j.portal)
        label = portal.label if portal else j.portal
        why: list[object] = []
        if not j.after and j.submitted_at is None and claimed(portal):
            why += probe(portal)
            if j.run_at is not None and j.run_at > self._snap.now:
                why.append(("not before", ts(j.run_at)))
        why += self._r50.why.get(j.id, ())
        reasons = [render(x, portal) for x in dict.fromkeys(why)]
        if ahead and j.submitted_at is None:
            reasons.append(f"{ahead} job(s) ahead on {label}, "
                           f"{portal.sessions if portal else 0} at a time")
        then = ""
        if j.processing is not None and j.submitted_at is None:
            then = (f"then {label} decides within ~{words(j.processing.p50)} "
                    f"({j.processing.source()})")
        if f90 is not None and f50 is not None:
            f90 = max(f50, f90)
        return Estimate(j.id, dt(s50), dt(s90), dt(u50), dt(u90), dt(f50), dt(f90), ahead,
                        tuple(reasons), then)


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


__all__ = ["Estimates", "estimate", "render", "text"]

"""When a portal can start a job: its openings (every calendar of the portal open, the
cut-off before closing left out) and its local days (rate limits count per portal day),
in POSIX seconds."""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime, time, timedelta

from portalq.portals.calendar import PortalCalendar, closes_at, next_start, zone
from portalq.portals.eta.model import HORIZON, INF, LOOK_AHEAD, PortalState, ts


class Openings:
    """The instants a portal can start a job: a sorted list of [start, last start], listed
    HORIZON at a time as the replay reaches further."""

    def __init__(self, portal: PortalState, now: datetime, *, steps: bool = True) -> None:
        # steps=False: the portal's own calendar only (when its lookups can run: a check is
        # a job of the portal, deferred while it is closed, whatever its steps' hours)
        self.cals = (portal.calendar, *portal.steps) if steps else (portal.calendar,)
        self.until = now
        self.limit = ts(now + LOOK_AHEAD)
        self.starts: list[float] = []
        self.ends: list[float] = []
        self._extend()

    def _extend(self) -> None:
        lo, hi = self.until, self.until + HORIZON
        found = spans(self.cals[0], lo, hi)
        for cal in self.cals[1:]:
            found = intersect(found, spans(cal, lo, hi))
        for a, b in found:
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
            if ts(self.until) >= self.limit:
                return None
            self._extend()

    def span(self, t: float) -> tuple[float, float] | None:
        """The first instant >= t a job can start and the last start of the opening it is
        in (None: none within LOOK_AHEAD): a replay moving forward in time looks again
        only past that."""
        while True:
            i = bisect_right(self.starts, t) - 1
            if i >= 0 and t <= self.ends[i]:
                return t, self.ends[i]
            if i + 1 < len(self.starts):
                return self.starts[i + 1], self.ends[i + 1]
            if ts(self.until) >= self.limit:
                return None
            self._extend()


def spans(cal: PortalCalendar, now: datetime, until: datetime) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    cut = timedelta(minutes=cal.cutoff_minutes)
    t: datetime | None = now
    while t is not None and t < until:
        s = next_start(cal, t)
        if s is None or s >= until:
            break
        end = closes_at(cal, s)
        if end is None:
            out.append((ts(s), INF))
            break
        out.append((ts(s), ts(end - cut)))
        t = end
    return out


def intersect(a: list[tuple[float, float]], b: list[tuple[float, float]],
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


class Days:
    """A portal's local days as [start, next start) in POSIX seconds (its rate limits
    count per portal day)."""

    def __init__(self, cal: PortalCalendar, now: datetime) -> None:
        tz = zone(cal.timezone)
        d = now.astimezone(tz).date() - timedelta(days=1)
        self.starts = [ts(datetime.combine(d + timedelta(days=i), time(0), tz))
                       for i in range(LOOK_AHEAD.days + 4)]

    def of(self, t: float) -> tuple[int, float]:
        """(the day's number, the next day's start)."""
        i = bisect_right(self.starts, t) - 1
        return i, self.starts[i + 1] if i + 1 < len(self.starts) else INF



__all__ = ["Days", "Openings", "intersect", "spans"]

"""The snapshot the estimator reads and the estimate it gives (portals/eta/)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from portalq.portals.calendar import PortalCalendar

#: the openings are listed this far ahead at a time, as the replay needs them
HORIZON = timedelta(days=60)
#: beyond it a job has no estimate ("does not open within a year")
LOOK_AHEAD = timedelta(days=366)


@dataclass(frozen=True)
class Duration:
    p50: timedelta
    p90: timedelta
    #: finished runs (or decisions) it was measured from (0: a default or a declaration)
    measured: int = 0

    def source(self) -> str:
        """Where a processing time comes from, for people: "declared" or "measured over N
        decisions"."""
        return f"measured over {self.measured} decisions" if self.measured else "declared"


@dataclass(frozen=True)
class Checks:
    """How a submission's decision is looked for (its lookup rule, portals/lookups.py): a
    check ``every`` after the submission, each next one ``backoff`` times further off, at
    most ``cap`` apart. A decision is seen -- the job done -- at the first check after it."""

    every: timedelta
    backoff: float
    cap: timedelta

    def _gaps(self) -> tuple[list[float], float]:
        """The gaps between checks while they back off, then the gap ever after."""
        every, cap = self.every.total_seconds(), self.cap.total_seconds()
        if self.backoff <= 1 or every >= cap:
            return [], max(min(every, cap), 1.0)
        gaps, gap = [], every
        while gap < cap:
            gaps.append(gap)
            gap *= self.backoff
        return gaps, cap

    def at(self, k: int) -> float:
        """The k-th check after the submission (k >= 1), in seconds after it."""
        gaps, step = self._gaps()
        if k <= len(gaps):
            return sum(gaps[:k])
        return sum(gaps) + (k - len(gaps)) * step

    def index(self, after: float) -> int:
        """The first check (k >= 1) at least ``after`` seconds after the submission."""
        gaps, step = self._gaps()
        t = 0.0
        for k, gap in enumerate(gaps, 1):
            t += gap
            if t >= after:
                return k
        return len(gaps) + max(1, math.ceil((after - t) / step))


@dataclass(frozen=True)
class Running:
    """A job running now whose portal decides later (or not): the order steps after it
    wait for its decision, seen at a check in the portal's hours like a claimed one's."""

    portal: str
    #: its run's expected end (the submission)
    end: datetime
    processing: Duration | None = None
    checks: Checks | None = None


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
    #: how the portal's decision is looked for (None: seen as soon as it is made)
    checks: Checks | None = None
    #: a submitted job's last check that saw no decision, as it ran (a closed portal
    #: defers checks: the schedule alone would say it saw nothing until later)
    last_check: datetime | None = None


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
    #: job id -> a running job (an order step's running predecessors)
    running: Mapping[int, Running] = field(default_factory=dict)


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
INF = float("inf")


def ts(t: datetime) -> float:
    return t.timestamp()


def dt(x: float | None) -> datetime | None:
    return None if x is None or x == INF else datetime.fromtimestamp(x, UTC)


def words(d: timedelta) -> str:
    """'3 min', '24 h', '10 days'."""
    h = d.total_seconds() / 3600
    if h >= 48:
        return f"{h / 24:.0f} days"
    return f"{h:.0f} h" if h >= 1 else f"{d.total_seconds() / 60:.0f} min"



__all__ = ["HORIZON", "INF", "LOOK_AHEAD", "Checks", "Duration", "Estimate", "Job",
           "PortalState", "Running", "Snapshot", "dt", "ts", "words"]

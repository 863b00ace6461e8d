"""Order step deadlines (issue 41): when a declared :class:`jobs.pipelines.Deadline` falls,
and whether a step's p90 ETA passes it. Pure: the order's creation, its steps' completions
and the portal's calendar in; an instant out.

- a cut-off (Delaware: what it receives by 22:30 ET gets that day's filing date) falls on
  the first date the order could get: the portal's local date of its first possible start
  at or after the order's creation by its weekly hours and holidays, at the cut-off (a
  closure added later does not move the date the order was promised);
- a number of days after an earlier step completed (a name reservation's expiry) falls
  that long after its completion, and is unknown until then.

A step is at risk when its p90 submission (the run's end, not the registry's decision
after it) comes after its deadline, or when it has no estimate at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from portalq.jobs.business.pipelines import Deadline
from portalq.portals.calendar import PortalCalendar, next_start, zone
from portalq.portals.eta import Estimate


@dataclass(frozen=True)
class AtRisk:
    step: str
    what: str
    due: datetime
    #: the p90 submission (None: no estimate)
    p90: datetime | None
    reasons: tuple[str, ...]

    def text(self, tz: str = "UTC") -> str:
        z = zone(tz)
        due = f"{self.due.astimezone(z):%a %d %b %H:%M %Z}"
        if self.p90 is None:
            late = "it has no estimate"
        else:
            late = (f"its p90 submission {self.p90.astimezone(z):%a %d %b %H:%M %Z} "
                    f"is {_late(self.p90 - self.due)} late")
        why = f" ({'; '.join(self.reasons)})" if self.reasons else ""
        return f"at risk: {self.step} must be in by {due} ({self.what}); {late}{why}"


def _late(d: timedelta) -> str:
    h = d.total_seconds() / 3600
    return f"{h / 24:.1f} days" if h >= 48 else (f"{h:.1f} h" if h >= 1
                                                 else f"{d.total_seconds() / 60:.0f} min")


def due(deadline: Deadline, *, created_at: datetime, completed: Mapping[str, datetime],
        calendar: PortalCalendar | None) -> datetime | None:
    """When ``deadline`` falls for an order created at ``created_at`` whose steps
    ``completed`` (step -> when); None while the step it counts from has not completed."""
    if deadline.after is not None:
        done = completed.get(deadline.after)
        return None if done is None else done + timedelta(days=deadline.days)
    assert deadline.cutoff is not None and deadline.timezone is not None
    tz = zone(deadline.timezone)
    first = created_at
    if calendar is not None:
        first = next_start(replace(calendar, closures=()), created_at) or created_at
    local = first.astimezone(tz)
    cut = datetime.combine(local.date(), deadline.cutoff, tz)
    if local.time() >= deadline.cutoff:
        cut = datetime.combine(local.date() + timedelta(days=1), deadline.cutoff, tz)
    return cut.astimezone(UTC)


def at_risk(step: str, deadline: Deadline, when: datetime, est: Estimate | None,
            ) -> AtRisk | None:
    """The warning for a step not submitted yet whose p90 passes ``when`` (or that has no
    estimate), else None."""
    p90 = est.submitted90 if est is not None else None
    if p90 is not None and p90 <= when:
        return None
    return AtRisk(step, deadline.what, when, p90, est.reasons if est is not None else ())


__all__ = ["AtRisk", "at_risk", "due"]

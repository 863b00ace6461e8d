"""Steps with their own calendar: a portal can be open while one of its steps is not.

BC Registries' payment goes through PayBC, which keeps shorter hours than the registry
("PayBC is normally available: Monday to Friday: 6:00am to 9:00pm / Saturday: 12:00am to
7:00pm / Sunday: 12:00pm to 12:00am", Pacific: bcgov/business-create-ui's payment error
dialog; docs/portals/sources.md). A job that would reach such a step outside its hours
waits before it starts (a ``DeferUntil``: no attempt spent, no browser opened) rather than
failing at the payment page: it must never reach "File and Pay" only to leave a saved draft
behind (:func:`gate`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from portalq.jobs import settings
from portalq.jobs.errors import DeferUntil
from portalq.portals.calendar import PortalCalendar, can_start, next_start, parse_hours

#: (portal, step) -> the step's calendar; ``cutoff_minutes``: time the flow needs before
#: it reaches the step (a flow is not started when the step would close before it gets there)
STEPS: dict[tuple[str, str], PortalCalendar] = {
    ("bc_corporate_online", "payment"): PortalCalendar(
        code="bc_corporate_online/payment (PayBC)", timezone="America/Vancouver",
        windows=parse_hours("Mon-Fri 06:00-21:00; Sat 00:00-19:00; Sun 12:00-24:00"),
        cutoff_minutes=10),
}


def calendar_of(portal: str, step: str) -> PortalCalendar | None:
    """The step's calendar: the sourced one, or the hours a deployment set in
    ``PORTALQ_STEP_HOURS_<PORTAL>_<STEP>`` (e.g. ``Daily 00:00-24:00`` where the portal is a
    stand-in that takes payments at any hour, as in the demo and the tests); bad hours
    raise ValueError."""
    cal = STEPS.get((portal, step))
    hours = settings.variable("PORTALQ_STEP_HOURS_", f"{portal}_{step}".upper())
    if cal is None or not hours:
        return cal
    return replace(cal, windows=parse_hours(hours))


def step_opens(portal: str, step: str, now: datetime) -> datetime | None:
    """None when ``portal``'s ``step`` can be reached from ``now``; else when it can."""
    cal = calendar_of(portal, step)
    if cal is None or can_start(cal, now):
        return None
    return next_start(cal, now) or now


def gate(portal: str, step: str, now: datetime, what: str) -> None:
    """Raise a :class:`DeferUntil` (no attempt spent) to ``portal``'s ``step``'s next
    opening when a flow starting ``now`` would reach it closed (or closing within the time
    the flow needs to get there); ``what``: the job's next move, for the message."""
    opens = step_opens(portal, step, now)
    if opens is not None:
        raise DeferUntil(f"{portal}: {what} needs its {step} step, closed by the time the flow "
                         f"would reach it ({STEPS[(portal, step)].code}); it starts when that "
                         f"opens at {opens:%Y-%m-%d %H:%M} UTC", when=opens)

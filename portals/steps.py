"""Steps with their own calendar: a portal can be open while one of its steps is not.

BC Registries' payment goes through PayBC, which keeps shorter hours than the registry
("PayBC is normally available: Monday to Friday: 6:00am to 9:00pm / Saturday: 12:00am to
7:00pm / Sunday: 12:00pm to 12:00am", Pacific; ../shared/portals/bc-registries.txt). A job
that would reach such a step outside its hours waits before it starts (a ``DeferUntil``:
no attempt spent, no browser opened) rather than failing at the payment page.
"""

from __future__ import annotations

from datetime import datetime

from portalq.portals.calendar import PortalCalendar, can_start, next_start, parse_hours

#: (portal, step) -> the step's calendar; ``cutoff_minutes``: time the flow needs before
#: it reaches the step (a flow is not started when the step would close before it gets there)
STEPS: dict[tuple[str, str], PortalCalendar] = {
    ("bc_corporate_online", "payment"): PortalCalendar(
        code="bc_corporate_online/payment (PayBC)", timezone="America/Vancouver",
        windows=parse_hours("Mon-Fri 06:00-21:00; Sat 00:00-19:00; Sun 12:00-24:00"),
        cutoff_minutes=10),
}


def step_opens(portal: str, step: str, now: datetime) -> datetime | None:
    """None when ``portal``'s ``step`` can be reached from ``now``; else when it can."""
    cal = STEPS.get((portal, step))
    if cal is None or can_start(cal, now):
        return None
    return next_start(cal, now) or now

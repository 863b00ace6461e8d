"""Order step deadlines (portals/deadlines.py): when they fall and when a step is at risk."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from portalq.jobs.business.pipelines import Deadline
from portalq.jobs.errors import InputError
from portalq.portals import deadlines
from portalq.portals.calendar import Closure
from portalq.portals.eta import Estimate
from portalq.portals.order_kinds import DE_SAME_DAY
from portalq.portals.presets import calendar_from_preset

DE = calendar_from_preset("delaware_icis")


def _utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def _due(created: datetime, cal=DE) -> datetime | None:
    return deadlines.due(DE_SAME_DAY, created_at=created, completed={}, calendar=cal)


def test_the_same_day_cut_off_falls_on_the_first_date_the_order_can_get():
    assert _due(_utc(2026, 12, 7, 15)) == _utc(2026, 12, 8, 3, 30)     # Mon -> Mon 22:30 ET
    assert _due(_utc(2026, 12, 8, 3, 40)) == _utc(2026, 12, 9, 3, 30)  # Mon 22:40 -> Tue
    assert _due(_utc(2026, 12, 5, 15)) == _utc(2026, 12, 8, 3, 30)     # Saturday -> Monday
    # 24 Dec 2026 after hours: Christmas, the weekend; then Monday 28th
    assert _due(_utc(2026, 12, 25, 4)) == _utc(2026, 12, 29, 3, 30)


def test_a_closure_added_later_does_not_move_the_promised_date():
    closed = calendar_from_preset("delaware_icis", closures=(
        Closure(_utc(2026, 12, 7, 0), _utc(2026, 12, 8, 14), "conversion"),))
    assert _due(_utc(2026, 12, 7, 15), closed) == _utc(2026, 12, 8, 3, 30)


def test_a_reservation_expires_days_after_the_step_it_counts_from():
    nr = Deadline("the name reservation's expiry", after="name_search", days=56)
    approved = _utc(2026, 12, 1, 18)
    assert deadlines.due(nr, created_at=approved, completed={}, calendar=None) is None
    assert deadlines.due(nr, created_at=approved, completed={"name_search": approved},
                         calendar=None) == approved + timedelta(days=56)


def test_at_risk_only_when_the_p90_submission_passes_the_deadline():
    due = _utc(2026, 12, 8, 3, 30)
    fine = Estimate(1, due, due, due - timedelta(minutes=1), due, due, due)
    assert deadlines.at_risk("file_entity", DE_SAME_DAY, due, fine) is None
    late = Estimate(1, due, due, due, due + timedelta(hours=10), due, due,
                    reasons=("delaware_icis opens Tue 08:00 EST",))
    risk = deadlines.at_risk("file_entity", DE_SAME_DAY, due, late)
    assert risk is not None and risk.text("America/New_York") == (
        "at risk: file_entity must be in by Mon 07 Dec 22:30 EST (Delaware's 22:30 ET cut-off "
        "for the order's filing date); its p90 submission Tue 08 Dec 08:30 EST is 10.0 h late "
        "(delaware_icis opens Tue 08:00 EST)")
    unknown = deadlines.at_risk("file_entity", DE_SAME_DAY, due, None)
    assert unknown is not None and "it has no estimate" in unknown.text()


def test_a_deadline_is_declared_one_way_or_the_other():
    for bad in (dict(), dict(cutoff=time(22, 30)), dict(after="x"),
                dict(cutoff=time(1), timezone="UTC", after="x", days=1)):
        with pytest.raises(InputError):
            Deadline("x", **bad)

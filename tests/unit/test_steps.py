"""Steps with their own calendar: BC's payment keeps PayBC's hours (portals/steps.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from portalq.jobs.errors import DeferUntil
from portalq.portals import steps
from portalq.portals.calendar import zone

BC = "bc_corporate_online"
OVERRIDE = "PORTALQ_STEP_HOURS_BC_CORPORATE_ONLINE_PAYMENT"


@pytest.fixture(autouse=True)
def paybc_hours(monkeypatch):
    """PayBC's own hours, not the tests' any-hour stand-in setting (tests/conftest.py)."""
    monkeypatch.delenv(OVERRIDE, raising=False)


def pacific(y: int, mo: int, d: int, h: int, mi: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, tzinfo=zone("America/Vancouver")).astimezone(UTC)


@pytest.mark.parametrize(("now", "opens"), [
    (pacific(2026, 3, 2, 21, 30), pacific(2026, 3, 3, 6)),    # Monday after 21:00
    (pacific(2026, 3, 2, 20, 55), pacific(2026, 3, 3, 6)),    # closes before arrival
    (pacific(2026, 3, 7, 19, 0), pacific(2026, 3, 8, 12)),    # Saturday 19:00 -> Sunday noon (DST)
    (pacific(2026, 3, 2, 5, 59), pacific(2026, 3, 2, 6)),     # Monday before six
])
def test_payment_closed_on_arrival_defers_to_paybc_opening(now, opens):
    assert steps.step_opens(BC, "payment", now) == opens
    with pytest.raises(DeferUntil, match="PayBC") as info:
        steps.gate(BC, "payment", now, "File and Pay")
    assert info.value.when == opens


@pytest.mark.parametrize("now", [pacific(2026, 3, 2, 20, 50), pacific(2026, 3, 7, 0, 0),
                                 pacific(2026, 3, 8, 23, 0)])
def test_payment_open_long_enough_lets_the_job_start(now):
    assert steps.step_opens(BC, "payment", now) is None
    steps.gate(BC, "payment", now, "File and Pay")   # no deferral


def test_a_step_without_its_own_calendar_is_never_gated():
    steps.gate("delaware_icis", "payment", pacific(2026, 3, 2, 23), "anything")


def test_a_deployment_sets_the_steps_hours(monkeypatch):
    """A stand-in PayBC (the demo) takes payments at any hour; bad hours are refused."""
    monday_2130 = pacific(2026, 3, 2, 21, 30)
    monkeypatch.setenv(OVERRIDE, "Daily 00:00-24:00")
    assert steps.step_opens(BC, "payment", monday_2130) is None
    monkeypatch.setenv(OVERRIDE, "Mon 22:00-23:00")
    assert steps.step_opens(BC, "payment", monday_2130) == pacific(2026, 3, 2, 22)
    monkeypatch.setenv(OVERRIDE, "Mon 25:00-26:00")
    with pytest.raises(ValueError, match="bad time"):
        steps.step_opens(BC, "payment", monday_2130)

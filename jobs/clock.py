"""The one clock.

Every "now" in portalq (deferral, backoff, heartbeats, rescue, rate limits) comes from
:func:`now`. SQL never calls ``now()``: the instant is passed in as a parameter, so a test
can move time for the whole system — in-process with :func:`set_clock` /
:class:`FrozenClock`, or across processes with ``PORTALQ_CLOCK_OFFSET_S`` (seconds added
to the wall clock) or ``PORTALQ_FROZEN_NOW`` (an ISO 8601 instant).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from portalq.jobs import settings

_lock = threading.Lock()


def _system_now() -> datetime:
    return datetime.now(UTC)


def _from_env() -> Callable[[], datetime]:
    knobs = settings.current(settings.TestSettings)
    if knobs.frozen_now:
        instant = parse_instant(knobs.frozen_now)
        return lambda: instant
    if knobs.clock_offset_s is not None:
        delta = timedelta(seconds=knobs.clock_offset_s)
        return lambda: _system_now() + delta
    return _system_now


def now() -> datetime:
    """The current instant, timezone-aware UTC."""
    return _now()


def set_clock(fn: Callable[[], datetime] | None) -> None:
    """Replace the clock (``None`` restores the environment's clock)."""
    global _now
    with _lock:
        _now = fn if fn is not None else _from_env()


class FrozenClock:
    """A clock that stands still until moved; install it with ``set_clock(clock)``."""

    def __init__(self, instant: datetime) -> None:
        self.instant = instant.astimezone(UTC)

    def __call__(self) -> datetime:
        return self.instant

    def advance(self, **kwargs: float) -> datetime:
        self.instant += timedelta(**kwargs)
        return self.instant

    def set(self, instant: datetime) -> None:
        self.instant = instant.astimezone(UTC)


def parse_instant(text: str) -> datetime:
    """Parse an ISO 8601 instant; a naive value is rejected (ambiguous across hosts)."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not an ISO 8601 instant: {text!r}") from exc
    if value.tzinfo is None:
        raise ValueError(f"instant needs a UTC offset (e.g. 2026-12-01T09:00:00Z): {text!r}")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"instant out of range (years 1..9999 in UTC): {text!r}") from None


_now: Callable[[], datetime] = _from_env()

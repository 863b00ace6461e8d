"""A portal's weekly opening windows and one-off closures, and their text form
(``"Mon-Fri 06:00-01:00"``): the data a :class:`~portals.calendar.PortalCalendar` is made of."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time

__all__ = ["Closure", "Window", "format_window", "parse_hours", "parse_window"]

MIDNIGHT = time(0)
_DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY_LOOKUP = {
    **{n.lower(): i for i, n in enumerate(_DAY_NAMES)},
    **{
        n: i
        for i, n in enumerate(
            ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
        )
    },
}


@dataclass(frozen=True)
class Window:
    """A weekly opening window in the portal's local wall-clock time.

    ``weekday`` (0=Monday) is the day the window opens. ``closes <= opens`` means the
    window crosses midnight into the next day (06:00-01:00; 18:00-00:00 runs to midnight);
    ``opens == closes == 00:00`` is the whole day. Times are whole minutes.
    """

    weekday: int
    opens: time
    closes: time

    def __post_init__(self) -> None:
        if isinstance(self.weekday, bool) or not isinstance(self.weekday, int):
            raise ValueError(f"weekday must be an int 0..6, got {self.weekday!r}")
        if not 0 <= self.weekday <= 6:
            raise ValueError(f"weekday must be 0 (Mon) .. 6 (Sun), got {self.weekday}")
        for label, t in (("opens", self.opens), ("closes", self.closes)):
            if not isinstance(t, time) or t.tzinfo is not None:
                raise ValueError(f"{label} must be a naive datetime.time, got {t!r}")
            if t.second or t.microsecond:
                raise ValueError(f"{label} must be a whole minute, got {t.isoformat()}")
        if self.opens == self.closes and self.opens != MIDNIGHT:
            raise ValueError(
                f"zero-length window {self.opens:%H:%M}-{self.closes:%H:%M} "
                "(use 00:00-24:00 for the whole day)"
            )

    @property
    def whole_day(self) -> bool:
        return self.opens == self.closes == MIDNIGHT

    @property
    def crosses_midnight(self) -> bool:
        """True if the window runs past 24:00 into the next day (not just up to it)."""
        return not self.whole_day and MIDNIGHT < self.closes <= self.opens

    def minutes(self) -> tuple[int, int]:
        """(start, end) in minutes after the opening day's midnight; end may exceed 1440."""
        start = self.opens.hour * 60 + self.opens.minute
        end = self.closes.hour * 60 + self.closes.minute
        if self.whole_day or end <= start:
            end += 1440
        return start, end


@dataclass(frozen=True)
class Closure:
    """A one-off closure or maintenance period ``[starts_at, ends_at)`` (aware instants)."""

    starts_at: datetime
    ends_at: datetime
    reason: str = ""

    def __post_init__(self) -> None:
        for label, t in (("starts_at", self.starts_at), ("ends_at", self.ends_at)):
            if not isinstance(t, datetime) or t.utcoffset() is None:
                raise ValueError(f"closure {label} must be a timezone-aware datetime")
            object.__setattr__(self, label, t.astimezone(UTC))
        if self.ends_at <= self.starts_at:
            raise ValueError(
                f"closure must end after it starts ({self.starts_at} .. {self.ends_at})"
            )


# --- the text form ------------------------------------------------------------------

_TIME_RE = re.compile(r"^(\d{1,2}):(\d{2})$")
_SPEC_RE = re.compile(r"^\s*(?P<days>\S+)\s+(?P<opens>[\d:]+)\s*[-\u2013]\s*(?P<closes>[\d:]+)\s*$")


def _parse_time(text: str, *, closing: bool) -> time:
    m = _TIME_RE.match(text)
    if not m:
        raise ValueError(f"bad time {text!r}: expected HH:MM")
    hh, mm = int(m[1]), int(m[2])
    if closing and (hh, mm) == (24, 0):
        return MIDNIGHT
    if hh > 23 or mm > 59:
        raise ValueError(
            f"bad time {text!r}: out of range" + ("" if closing else " (24:00 only closes)")
        )
    return time(hh, mm)


def _parse_day(text: str) -> int:
    try:
        return _DAY_LOOKUP[text.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown day {text.strip()!r}: use Mon..Sun") from None


def _parse_days(text: str) -> list[int]:
    if text.strip().lower() in ("daily", "mon-sun"):
        return list(range(7))
    days: list[int] = []
    for part in text.split(","):
        if not part.strip():
            raise ValueError(f"empty day in {text!r}")
        if "-" in part or "\u2013" in part:
            first, _, last = part.replace("\u2013", "-").partition("-")
            a, b = _parse_day(first), _parse_day(last)
            days.extend((a + i) % 7 for i in range((b - a) % 7 + 1))
        else:
            days.append(_parse_day(part))
    return days


def parse_window(spec: str) -> tuple[Window, ...]:
    """Parse ``"Mon-Fri 06:00-01:00"`` (or ``"Sat,Sun 13:00-22:00"``) into windows.

    Days: Mon..Sun or full names, ranges (``Fri-Mon`` wraps) and comma lists. ``24:00``
    may close a window; ``00:00-24:00`` is the whole day. Raises ValueError on bad input.
    """
    m = _SPEC_RE.match(spec)
    if not m:
        raise ValueError(f"bad hours {spec!r}: expected e.g. 'Mon-Fri 06:00-22:00'")
    days = _parse_days(m["days"])
    opens = _parse_time(m["opens"], closing=False)
    closes = _parse_time(m["closes"], closing=True)
    if opens == closes and opens != MIDNIGHT:
        raise ValueError(f"bad hours {spec!r}: zero-length window")
    return tuple(Window(d, opens, closes) for d in dict.fromkeys(days))


def parse_hours(spec: str) -> tuple[Window, ...]:
    """Parse several window specs separated by ``;`` or newlines."""
    parts = [p for p in re.split(r"[;\n]", spec) if p.strip()]
    if not parts:
        raise ValueError("no opening hours given")
    return tuple(w for p in parts for w in parse_window(p))


def format_window(w: Window) -> str:
    """``"Mon 06:00-01:00"``; a window closing at midnight reads ``24:00``."""
    closes = "24:00" if w.closes == MIDNIGHT else f"{w.closes:%H:%M}"
    return f"{_DAY_NAMES[w.weekday]} {w.opens:%H:%M}-{closes}"

"""Time zones from the ``tzdata`` package (never the host's), and the pieces of UTC time
in which a zone's offset is constant: what the calendar reads wall-clock hours with."""

from __future__ import annotations

import importlib.resources
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from importlib.resources.abc import Traversable
from zoneinfo import ZoneInfo

__all__ = ["offset", "segments", "transitions", "tzdata_resource", "zone"]


def tzdata_resource(name: str) -> Traversable:
    """The TZif file for IANA zone ``name`` inside the ``tzdata`` package."""
    parts = name.split("/")
    if not name or any(p in ("", ".", "..") or "\\" in p for p in parts):
        raise ValueError(f"unknown time zone {name!r}")
    res = importlib.resources.files("tzdata.zoneinfo").joinpath(*parts)
    if not res.is_file():
        raise ValueError(f"unknown time zone {name!r}")
    return res


@cache
def zone(name: str) -> ZoneInfo:
    """The ZoneInfo for ``name``, built from the ``tzdata`` package (ValueError if unknown)."""
    with tzdata_resource(name).open("rb") as fobj:
        try:
            return ZoneInfo.from_file(fobj, key=name)
        except ValueError as exc:  # not a TZif file (e.g. a data file in the package)
            raise ValueError(f"unknown time zone {name!r}") from exc


def offset(tz: ZoneInfo, u: datetime) -> timedelta:
    off = u.astimezone(tz).utcoffset()
    assert off is not None
    return off


@lru_cache(maxsize=512)
def transitions(name: str, year: int) -> tuple[datetime, ...]:
    """UTC instants in ``year`` at which the zone's UTC offset changes.

    Found by probing every 6 hours and bisecting to the second (tz transitions fall on
    whole seconds); assumes no zone changes its offset twice within 6 hours.
    """
    tz = zone(name)
    lo_s = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    end_s = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    step = 6 * 3600
    found: list[datetime] = []

    def off(s: int) -> timedelta:
        return offset(tz, datetime.fromtimestamp(s, UTC))

    prev = off(lo_s)
    while lo_s < end_s:
        hi_s = min(lo_s + step, end_s)
        cur = off(hi_s)
        if cur != prev:
            a, b = lo_s, hi_s  # off(a) == prev != off(b)
            while b - a > 1:
                mid = (a + b) // 2
                if off(mid) == prev:
                    a = mid
                else:
                    b = mid
            found.append(datetime.fromtimestamp(b, UTC))
        prev, lo_s = cur, hi_s
    return tuple(found)


def segments(name: str, u0: datetime, u1: datetime) -> list[tuple[datetime, datetime, timedelta]]:
    """Split UTC ``[u0, u1)`` into pieces of constant UTC offset: (start, end, offset)."""
    tz = zone(name)
    cuts = sorted(
        {t for y in range(u0.year, u1.year + 1) for t in transitions(name, y) if u0 < t < u1}
    )
    edges = [u0, *cuts, u1]
    return [(a, b, offset(tz, a)) for a, b in zip(edges, edges[1:], strict=False)]

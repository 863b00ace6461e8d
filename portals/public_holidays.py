"""A region's public holidays, from the ``holidays`` package (imported only when needed: it
loads every country's module). The calendar keeps a portal's windows shut on them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from functools import lru_cache

__all__ = ["check_region", "dates", "holiday_names", "named"]


@lru_cache(maxsize=1)
def supported_countries() -> dict[str, list[str]]:
    import holidays  # imports every country: only when a region must be checked

    return holidays.list_supported_countries()


def check_region(country: str | None, subdiv: str | None) -> None:
    if country is None:
        if subdiv is not None:
            raise ValueError("holiday_subdiv given without holiday_country")
        return
    subdivs = supported_countries().get(country)
    if subdivs is None:
        raise ValueError(f"unknown holiday country {country!r}")
    if subdiv is not None and subdiv not in subdivs:
        raise ValueError(f"unknown holiday subdivision {subdiv!r} for {country}")


@lru_cache(maxsize=256)
def named(country: str, subdiv: str | None, year: int) -> tuple[tuple[date, str], ...]:
    # holidays imports every country: only when a region must be checked
    import holidays

    # observed days can be listed under a neighbouring year (Jan 1 observed on Dec 31)
    try:
        found = holidays.country_holidays(country, subdiv=subdiv, years=(year - 1, year, year + 1))
    except NotImplementedError as exc:
        raise ValueError(f"no holiday data for {country}/{subdiv}: {exc}") from exc
    return tuple(sorted((d, name) for d, name in found.items() if d.year == year))


@lru_cache(maxsize=256)
def dates(country: str, subdiv: str | None, year: int) -> frozenset[date]:
    return frozenset(d for d, _ in named(country, subdiv, year))


def holiday_names(country: str, subdiv: str | None, years: Iterable[int],
                  ) -> list[tuple[date, str]]:
    """The region's holidays in ``years`` with their names, from the ``holidays`` package
    (what the service stores in the database; ValueError for an unknown region)."""
    check_region(country, subdiv)
    return [row for y in sorted(set(years)) for row in named(country, subdiv, y)]

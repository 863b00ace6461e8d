"""Holidays stored per portal: the service reads them from the database (so its processes
never import the `holidays` package), falls back to the package for years or regions not
stored, and its tick keeps them current."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, date, datetime

import psycopg

from portalq.jobs import clock
from portalq.portals import calendar as cal
from portalq.scheduler import calendar_cache as calendars
from tests.conftest import ROOT, run_cli
from tests.service_helpers import Service, wait_until

# the CLI's clock, frozen: the years it stores are then known whatever the wall clock says
# (the test compared the CLI's stored years with this process's wall clock: it failed on
# New Year's Eve and under any clock offset)
FROZEN = {"PORTALQ_FROZEN_NOW": "2026-06-15T12:00:00Z"}
FROZEN_YEAR = 2026

SEEDED = {"bc_corporate_online": ("CA", "BC"), "delaware_icis": ("US", "DE"),
          "irs_ein": ("US", None)}


async def _load(dsn):
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        return await calendars.load(c)


def _stored(conn, code):
    return conn.execute("SELECT holidays_region, holidays_from, holidays_to FROM portalq.portals "
                        "WHERE code = %s", (code,)).fetchone()


def test_portalq_migrate_stores_the_seeded_portals_holidays(db, conn):
    conn.execute("DROP SCHEMA portalq CASCADE")
    out = run_cli("migrate", env=FROZEN)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == ("holidays stored for bc_corporate_online, "
                                           "delaware_icis, irs_ein")
    assert run_cli("migrate", env=FROZEN).stdout.strip().splitlines()[-1].startswith(
        "schema at ")
    year = FROZEN_YEAR
    assert _stored(conn, "irs_ein") == ("US/", year - 1, year + 5)


def test_stored_holidays_are_the_ones_the_package_gives(conn, dsn):
    year = clock.now().year
    portals = asyncio.run(_load(dsn))
    for code, (country, subdiv) in SEEDED.items():
        assert _stored(conn, code) == (f"{country}/{subdiv or ''}", year - 1, year + 5)
        p = portals[code].calendar
        assert [y for y, _ in p.known_holidays] == list(range(year - 1, year + 6))
        for y, days in p.known_holidays:
            assert days == frozenset(d for d, _ in cal.holiday_names(country, subdiv, [y]))
    names = dict(conn.execute("SELECT day, name FROM portalq.portal_holidays "
                              "WHERE portal = 'delaware_icis'").fetchall())
    assert "Independence Day" in names[date(year, 7, 4)]


def test_a_worker_process_loads_calendars_without_importing_the_holidays_package(db, dsn):
    """The point of storing them: `holidays` imports every country (~8 MiB per process)."""
    year = clock.now().year
    code = f"""
import asyncio, sys, json
from datetime import datetime, UTC
import psycopg
from portalq.scheduler import calendar_cache as calendars
from portalq.portals import calendar as cal
async def main():
    async with await psycopg.AsyncConnection.connect({dsn!r}) as c:
        portals = await calendars.load(c)
    irs = portals["irs_ein"].calendar
    july4 = datetime({year}, 7, 4, 16, tzinfo=UTC)   # noon in New York
    print(json.dumps({{"open_july4": cal.is_open(irs, july4),
                      "next": cal.next_open(irs, july4).isoformat(),
                      "holidays_imported": "holidays" in sys.modules}}))
asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["open_july4"] is False
    assert got["holidays_imported"] is False
    # and the answer is the one the package itself gives
    lib_cal = cal.PortalCalendar("irs_ein", "America/New_York",
                                 asyncio.run(_load(dsn))["irs_ein"].calendar.windows,
                                 holiday_country="US")
    july4 = datetime(year, 7, 4, 16, tzinfo=UTC)
    assert got["next"] == cal.next_open(lib_cal, july4).isoformat()


def test_region_change_uses_the_package_until_the_new_region_is_stored(conn, dsn):
    year = clock.now().year
    conn.execute("UPDATE portalq.portals SET holiday_subdiv = 'ON' WHERE code = 'bc_corporate_online'")
    bc = asyncio.run(_load(dsn))["bc_corporate_online"].calendar
    assert bc.known_holidays == ()           # stored BC days no longer apply
    ontario = frozenset(d for d, _ in cal.holiday_names("CA", "ON", [year]))
    assert cal.holiday_dates(bc, year) == ontario
    assert ontario != frozenset(d for d, _ in cal.holiday_names("CA", "BC", [year]))

    async def refresh():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await calendars.refresh_holidays(c)
    assert asyncio.run(refresh()) == (["bc_corporate_online"], [])
    assert asyncio.run(refresh()) == ([], [])      # nothing more due
    assert _stored(conn, "bc_corporate_online") == ("CA/ON", year - 1, year + 5)
    bc = asyncio.run(_load(dsn))["bc_corporate_online"].calendar
    assert dict(bc.known_holidays)[year] == ontario


def test_years_not_stored_come_from_the_package(conn, dsn):
    year = clock.now().year
    irs = asyncio.run(_load(dsn))["irs_ein"].calendar
    later = year + 9
    assert later not in dict(irs.known_holidays)
    assert cal.holiday_dates(irs, later) == frozenset(
        d for d, _ in cal.holiday_names("US", None, [later]))


def test_tick_extends_holidays_that_run_out(db, dsn, conn, tmp_path):
    """A service running into a new year stores the years ahead by itself."""
    year = clock.now().year
    conn.execute("UPDATE portalq.portals SET holidays_to = %s", (year,))   # next year not covered
    conn.execute("DELETE FROM portalq.portal_holidays WHERE day >= %s", (date(year + 1, 1, 1),))
    svc = Service(db, tmp_path, "hol").start()
    try:
        wait_until(lambda: all(_stored(conn, c)[2] == year + 5 for c in SEEDED), 30,
                   "the tick to store the coming years' holidays")
    finally:
        svc.stop()
    assert "stored holidays of bc_corporate_online, delaware_icis, irs_ein" in svc.log()
    n = conn.execute("SELECT count(*) FROM portalq.portal_holidays WHERE portal = 'irs_ein' "
                     "AND day >= %s", (date(year + 1, 1, 1),)).fetchone()[0]
    assert n == len(cal.holiday_names("US", None, range(year + 1, year + 6)))


def test_cli_refresh_holidays_recomputes_every_portal(db, conn):
    conn.execute("DELETE FROM portalq.portal_holidays WHERE portal = 'irs_ein'")
    out = run_cli("portals", "refresh-holidays", env=FROZEN)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("holidays stored for 3 portal(s): "
                                  "bc_corporate_online, delaware_icis, irs_ein")
    year = FROZEN_YEAR
    assert conn.execute("SELECT count(*) FROM portalq.portal_holidays WHERE portal = 'irs_ein'"
                        ).fetchone()[0] == len(cal.holiday_names("US", None,
                                                                 range(year - 1, year + 6)))

"""`portalq portals ...` as a subprocess, with a moved clock."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.conftest import run_cli

# Thanksgiving 2026 (Thu 2026-11-26) 12:00 ET: IRS closed for the federal holiday
THANKSGIVING_NOON = "2026-11-26T17:00:00Z"
# the clock of the calls that ask about late 2026 without a clock of their own: they read
# the calendar, so they freeze it (they passed only while the wall clock was near 2026)
IN_NOV_2026 = {"PORTALQ_FROZEN_NOW": "2026-11-20T12:00:00Z"}


def test_list_shows_state_and_next_change(db):
    out = run_cli("portals", "list", "--json", env={"PORTALQ_FROZEN_NOW": THANKSGIVING_NOON})
    assert out.returncode == 0, out.stderr
    rows = {r["code"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"bc_corporate_online", "irs_ein", "delaware_icis", "crtc", "email"}
    assert rows["irs_ein"]["open"] is False
    assert rows["irs_ein"]["next_change"] == "2026-11-27T12:00:00Z"  # Fri 07:00 ET
    assert rows["crtc"]["open"] is True and rows["crtc"]["next_change"] is None
    assert rows["bc_corporate_online"]["timezone"] == "America/Vancouver"
    text = run_cli("portals", "list", env={"PORTALQ_FROZEN_NOW": THANKSGIVING_NOON}).stdout
    assert "irs_ein" in text and "closed" in text


def test_next_open_at_instant(db):
    out = run_cli("portals", "next-open", "irs_ein", "--at", THANKSGIVING_NOON, env=IN_NOV_2026)
    assert out.stdout.strip() == "2026-11-27T12:00:00Z"
    # open at that instant: the instant itself
    out = run_cli("portals", "next-open", "irs_ein", "--at", "2026-11-27T15:30:00Z", "--json",
                  env=IN_NOV_2026)
    data = json.loads(out.stdout)
    assert data["next_open"] == "2026-11-27T15:30:00Z" and data["open_at_instant"] is True


def test_set_hours_preset_and_windows(db, dsn):
    assert run_cli("portals", "set-hours", "irs_ein", "--preset", "irs_ein_extended",
                   env=IN_NOV_2026).returncode == 0
    # Friday 00:30 ET is inside Thursday's 06:00-01:00 window ... but Thursday is
    # Thanksgiving, so its window (and its after-midnight tail) stays closed
    out = run_cli("portals", "next-open", "irs_ein", "--at", "2026-11-27T05:30:00Z",
                  env=IN_NOV_2026)
    assert out.stdout.strip() == "2026-11-27T11:00:00Z"  # Fri 06:00 ET
    out = run_cli("portals", "next-open", "irs_ein", "--at", "2026-12-02T05:30:00Z",
                  env=IN_NOV_2026)
    assert out.stdout.strip() == "2026-12-02T05:30:00Z"  # Tue night 00:30 ET: open
    assert run_cli("portals", "set-hours", "crtc", "Mon-Fri 07:00-17:00").returncode == 0
    hours = json.loads(run_cli("portals", "hours", "crtc", "--json").stdout)
    assert hours["windows"] == [f"{d} 07:00-17:00" for d in ("Mon", "Tue", "Wed", "Thu", "Fri")]


def _close_delaware_dec_1_to_3() -> None:
    """Delaware closed Tue 2026-12-01 08:00 ET to Thu 08:00 ET, recorded on Nov 30."""
    out = run_cli("portals", "close", "delaware_icis", "--from", "2026-12-01T13:00:00Z",
                  "--to", "2026-12-03T13:00:00Z", "--reason", "system conversion",
                  env={"PORTALQ_FROZEN_NOW": "2026-11-30T12:00:00Z"})
    assert out.returncode == 0, out.stderr


def test_close_records_a_closure(db):
    _close_delaware_dec_1_to_3()
    nxt = run_cli("portals", "next-open", "delaware_icis", "--at", "2026-12-01T15:00:00Z",
                  env={"PORTALQ_FROZEN_NOW": "2026-11-30T12:00:00Z"})
    assert nxt.stdout.strip() == "2026-12-03T13:00:00Z"  # Thu 08:00 ET, when it reopens
    hours = run_cli("portals", "hours", "delaware_icis",
                    env={"PORTALQ_FROZEN_NOW": "2026-11-30T12:00:00Z"})
    assert "system conversion" in hours.stdout


def test_next_open_at_a_past_instant_counts_the_closures_of_that_time(db):
    """--at names the instant asked about: a closure that covered it counts even when it
    ended long before now (the calendar used to load only closures ending after
    yesterday, so this answered 2026-12-01T15:00Z, when the portal was closed)."""
    _close_delaware_dec_1_to_3()
    nxt = run_cli("portals", "next-open", "delaware_icis", "--at", "2026-12-01T15:00:00Z",
                  env={"PORTALQ_FROZEN_NOW": "2027-03-01T12:00:00Z"})
    assert nxt.returncode == 0, nxt.stderr
    assert nxt.stdout.strip() == "2026-12-03T13:00:00Z"


@pytest.mark.parametrize("args, message", [
    (["portals", "hours", "moon"], "unknown portal 'moon'"),
    (["portals", "next-open", "moon"], "unknown portal 'moon'"),
    (["portals", "next-open", "irs_ein", "--at", "noon"], "--at: not an ISO 8601 instant"),
    (["portals", "set-hours", "irs_ein", "Mon 25:00-22:00"], "bad time '25:00'"),
    (["portals", "set-hours", "irs_ein", "Mox 07:00-22:00"], "unknown day"),
    (["portals", "set-hours", "irs_ein", "Mon 07:00-07:00"], "zero-length"),
    (["portals", "set-hours", "irs_ein", "--preset", "nope"], "unknown preset 'nope'"),
    (["portals", "set-hours", "irs_ein"], "give either windows or --preset"),
    (["portals", "close", "crtc", "--from", "2026-12-02T00:00:00Z", "--to",
      "2026-12-01T00:00:00Z", "--reason", "x"], "--to must be after --from"),
    (["portals", "close", "crtc", "--from", "2026-12-01T00:00:00Z", "--to",
      "2026-12-02T00:00:00Z", "--reason", " "], "--reason must not be empty"),
    (["portals", "close", "moon", "--from", "2026-12-01T00:00:00Z", "--to",
      "2026-12-02T00:00:00Z", "--reason", "x"], "unknown portal 'moon'"),
])
def test_bad_input_one_line_nothing_written(db, dsn, args, message):
    def snapshot():
        with psycopg.connect(dsn) as c:
            return (c.execute("SELECT portal, weekday, opens, closes FROM portalq.portal_hours "
                              "ORDER BY 1, 2, 3").fetchall(),
                    c.execute("SELECT count(*) FROM portalq.portal_closures").fetchone()[0])
    before = snapshot()
    out = run_cli(*args)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert snapshot() == before


def test_every_portal_change_from_the_cli_is_audited_like_the_consoles(db, dsn):
    """Invariant 14 for `portalq portals`: who (the OS user), what, when, why, before and
    after, committed with the change; a refused change leaves no row."""
    import getpass

    steps = [
        ("pause", "irs_ein", "--reason", "IRS says: planned outage"),
        ("resume", "irs_ein", "--reason", "outage over"),
        ("set-hours", "crtc", "Mon-Fri 07:00-17:00"),
        ("close", "delaware_icis", "--from", "2026-12-01T13:00:00Z", "--to",
         "2026-12-03T13:00:00Z", "--reason", "system conversion"),
        ("refresh-holidays", "--reason", "holidays package upgraded"),
    ]
    for step in steps:
        out = run_cli("portals", *step, env={"PORTALQ_FROZEN_NOW": "2026-11-30T12:00:00Z"})
        assert out.returncode == 0, (step, out.stderr)
    refused = run_cli("portals", "resume", "irs_ein")   # not paused: exit 3, nothing written
    assert refused.returncode == 3 and "not paused" in refused.stderr
    rows = json.loads(run_cli("audit", "--json").stdout)[::-1]   # oldest first
    assert [(r["action"], r["target"], r["reason"]) for r in rows] == [
        ("portal.pause", "portal:irs_ein", "IRS says: planned outage"),
        ("portal.resume", "portal:irs_ein", "outage over"),
        ("portal.set_hours", "portal:crtc", "portalq portals set-hours"),
        ("portal.close", "portal:delaware_icis", "system conversion"),
        ("portals.refresh_holidays", "portals", "holidays package upgraded")]
    assert all(r["source"] == "cli" and r["actor"].startswith(f"cli:{getpass.getuser()}@")
               for r in rows)
    pause, resume, hours, closure, holidays = rows
    assert pause["before"]["paused_at"] is None and pause["after"]["paused_by"] == "operator"
    assert resume["before"]["pause_reason"] == "IRS says: planned outage"
    assert resume["after"]["paused_at"] is None
    assert len(hours["after"]["hours"]) == 5 and hours["before"]["hours"] != \
        hours["after"]["hours"]
    assert closure["after"]["from"].startswith("2026-12-01T13:00:00")
    assert "irs_ein" in holidays["after"]["portals"]
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM portalq.portal_closures WHERE reason = "
                         "'system conversion'").fetchone()[0] == 1

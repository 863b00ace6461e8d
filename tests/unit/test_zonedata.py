"""portalq run refuses zone data older than the calendars need (tzdata 2026f)."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from portalq.portals.calendar import zone
from portalq.scheduler import cli, zonedata
from tests.conftest import ROOT


def old_zone_data(name: str) -> ZoneInfo:
    """What tzdata before 2026f says for BC: UTC-8 in winter (here: a fixed -8 zone)."""
    return ZoneInfo("Etc/GMT+8") if name == "America/Vancouver" else zone(name)


def test_installed_zone_data_is_new_enough():
    assert zone("America/Vancouver").utcoffset(datetime(2027, 1, 15, 12)) == timedelta(hours=-7)
    assert zonedata.zone_data_problem() is None


def test_older_zone_data_is_refused_with_a_clear_message():
    problem = zonedata.zone_data_problem(old_zone_data)
    assert problem is not None
    assert "America/Vancouver is UTC-08:00 on 2027-01-15" in problem
    assert "need UTC-07:00" in problem and "tzdata>=2026.6" in problem
    with pytest.raises(zonedata.ZoneDataTooOld):
        zonedata.check_zone_data(old_zone_data)


def test_portalq_run_refuses_to_start_on_old_zone_data(monkeypatch, capsys):
    """The whole `portalq run` path, in-process: the probe expects what the installed data
    does not say (as old data would not), and nothing starts: no database is touched (the
    URL names a closed port; reaching it would exit 4)."""
    at = datetime(2027, 1, 15, 12, tzinfo=UTC)
    monkeypatch.setattr(zonedata, "PROBES", (("America/Vancouver", at, timedelta(hours=-8)),))
    monkeypatch.setenv("PORTALQ_DATABASE_URL", "postgresql://u@127.0.0.1:1/db")
    with pytest.raises(SystemExit) as info:
        cli.main(["run"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("portalq: error: time-zone data too old") and err.count("\n") == 1


def test_the_tzdata_requirement_names_that_release():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"tzdata>={zonedata.REQUIRED}" in deps

"""The stand-in's account book (portals/standin/kit/portal_accounts.py): configuration checks,
lock-out counting, session life. Pure: no server, no browser."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from portalq.jobs import clock
from portalq.portals.standin.kit.portal_accounts import Accounts
from portalq.portals.standin.kit.state import PortalState


@pytest.fixture
def frozen():
    c = clock.FrozenClock(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    clock.set_clock(c)
    yield c
    clock.set_clock(None)


def book(**settings) -> Accounts:
    accounts = Accounts()
    accounts.configure({"enabled": True, "accounts": {"acme": {"password": "pw"}}, **settings})
    return accounts


@pytest.mark.parametrize("body, message", [
    ({"bogus": 1}, "unknown setting 'bogus'"),
    ({"accounts": {"a": {}}}, "needs a password"),
    ({"accounts": {"a": {"password": "x", "pin": 1}}}, "unknown key 'pin'"),
    ({"accounts": {"a": {"password": "x", "mfa": "sms"}}}, "bad mfa 'sms'"),
    ({"accounts": {"a": {"password": "x", "mfa": "totp"}}}, "bad mfa 'totp'"),
    ({"accounts": {"a": {"password": "x", "mfa": "email"}}}, "need an email"),
    ([], "expected an object"),
])
def test_bad_configuration_is_refused_and_nothing_changes(body, message):
    accounts = book()
    before = accounts.snapshot()
    with pytest.raises(ValueError, match=message):
        accounts.configure({"enabled": False, **body} if isinstance(body, dict) else body)
    assert accounts.snapshot() == before


def test_a_bad_control_body_changes_no_fault_either():
    portal = PortalState("crtc")
    with pytest.raises(ValueError):
        portal.control({"maintenance": True, "signin": {"bogus": 1}})
    with pytest.raises(ValueError):
        portal.control({"maintenance": True, "no_such_fault": 1, "signin": {"enabled": True}})
    assert portal.faults.maintenance is False and portal.accounts.config.enabled is False


def test_lock_out_after_the_configured_number_of_bad_passwords():
    accounts = book(lockout_after=3)
    assert [accounts.check_password("acme", p) for p in ("a", "b", "c", "pw")] == [
        "wrong", "wrong", "locked", "locked"]
    assert accounts.check_password("nobody", "pw") == "unknown"
    assert accounts.ledger()["accounts"]["acme"]["attempts"] == 4


def test_a_good_password_resets_the_count():
    accounts = book(lockout_after=2)
    assert [accounts.check_password("acme", p) for p in ("x", "pw", "x", "pw")] == [
        "wrong", "ok", "wrong", "ok"]


def test_naming_an_account_again_unlocks_it_and_null_removes_it():
    accounts = book(lockout_after=1)
    assert accounts.check_password("acme", "x") == "locked"
    accounts.configure({"accounts": {"acme": {"password": "pw"}}})
    assert accounts.check_password("acme", "pw") == "ok"
    accounts.configure({"accounts": {"acme": None}})
    assert accounts.snapshot()["accounts"] == []


def test_sessions_expire_by_pages_and_by_idle_time_on_the_jobs_clock(frozen):
    accounts = book(session_pages=2, idle_minutes=30)
    sid = accounts.open_session("acme")
    assert [accounts.touch(sid) for _ in range(3)] == ["ok", "ok", "expired"]
    assert accounts.touch(sid) == "none"
    sid = accounts.open_session("acme")
    frozen.advance(minutes=29)
    assert accounts.touch(sid) == "ok"
    frozen.advance(minutes=31)
    assert accounts.touch(sid) == "expired"


def test_single_session_ends_the_earlier_one_only_when_switched_on():
    accounts = book()
    first, second = accounts.open_session("acme"), accounts.open_session("acme")
    assert (accounts.touch(first), accounts.touch(second)) == ("ok", "ok")
    accounts.configure({"single_session": True})
    third = accounts.open_session("acme")
    assert [accounts.touch(s) for s in (first, second, third)] == ["ended", "ended", "ok"]


def test_no_secret_in_the_snapshot_ledger_or_repr():
    accounts = book()
    accounts.configure({"accounts": {"b": {"password": "hunter2", "totp_seed": "JBSWY3DPEHPK3PXP"}}})
    accounts.check_password("b", "hunter2")
    shown = repr(accounts.snapshot()) + repr(accounts.ledger()) + repr(accounts.accounts)
    assert "hunter2" not in shown and "JBSWY3DPEHPK3PXP" not in shown


def test_the_servers_smtp_address_is_the_default_and_survives_a_reset():
    portal = PortalState("crtc", accounts=Accounts("smtp://127.0.0.1:2525"))
    portal.control({"signin": {"smtp": "smtp://127.0.0.1:2626"}})
    assert portal.accounts.config.smtp == "smtp://127.0.0.1:2626"
    portal.reset()
    assert portal.accounts.config.smtp == "smtp://127.0.0.1:2525"
    assert portal.accounts.config.enabled is False

"""What a lookup may decide (jobs/waiting.py, portals/lookups.py): pure rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from portalq.jobs import waiting
from portalq.jobs.errors import DeferUntil, UncertainOutcome
from portalq.jobs.waiting import LookupRule, NotFound
from portalq.portals import lookups

T0 = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
H = timedelta(hours=1)


def rule(**kw):
    base = dict(portal="p", says="found is authoritative", not_found_conclusive_after=None,
                lost_answer_window=24 * H, check_every=timedelta(minutes=15), backoff=2.0,
                check_cap=4 * H, expected_within=24 * H)
    return LookupRule(**{**base, **kw})


@pytest.mark.parametrize("conclusive, age, verdict", [
    (None, timedelta(0), NotFound.WAIT),
    (None, 23 * H, NotFound.WAIT),
    (None, 24 * H, NotFound.PERSON),           # never "submit": a person decides
    (2 * H, H, NotFound.WAIT),                 # conclusive only N hours after
    (2 * H, 2 * H, NotFound.SUBMIT),
])
def test_not_found_decides_only_what_the_portal_vouches_for(conclusive, age, verdict):
    assert waiting.after_not_found(rule(not_found_conclusive_after=conclusive), T0,
                                   T0 + age) is verdict


def test_every_declared_portal_never_resubmits_on_not_found():
    for r in lookups.RULES.values():
        assert r.not_found_conclusive_after is None, r.portal
        assert waiting.after_not_found(r, T0, T0 + timedelta(days=30)) is NotFound.PERSON


def test_checks_back_off_to_the_cap():
    r = rule()
    gaps = [r.next_check(n, T0) - T0 for n in range(6)]
    assert gaps == [timedelta(minutes=m) for m in (15, 30, 60, 120, 240, 240)]


@pytest.mark.parametrize("checks", [40, 60, 1100, 10**6])
def test_a_long_wait_stays_at_the_cap(checks):
    # a job checked every 4 h for a week made 15 min x 2**40: beyond what a timedelta holds
    # (OverflowError at each check, an attempt spent each time, the job failed); 2.0**1100
    # is beyond a float
    for r in (rule(), *lookups.RULES.values()):
        assert r.next_check(checks, T0) - T0 == r.check_cap, r.portal


def test_marker_counts_checks_and_says_waiting_on_since_expected_by():
    r = rule(portal="bc_corporate_online")
    m1 = waiting.waiting({}, r, since=T0, now=T0 + H, what="examination of NR 1234567")
    m2 = waiting.waiting({waiting.KEY: m1}, r, since=T0, now=T0 + 2 * H, what="x")
    assert (m1["checks"], m2["checks"]) == (1, 2)
    assert m2["next_check"] == (T0 + 2 * H + timedelta(minutes=30)).isoformat()
    text = waiting.describe(m1)
    assert text == ("waiting on bc_corporate_online since 2026-12-01 15:00 UTC, expected by "
                    "2026-12-02 15:00 UTC (examination of NR 1234567)")
    exc = waiting.wait(m1)
    assert isinstance(exc, DeferUntil) and exc.when == T0 + H + timedelta(minutes=15)
    assert not waiting.overdue(m1, T0 + 24 * H) and waiting.overdue(m1, T0 + 25 * H)
    assert waiting.describe(None) == "" and waiting.marker({"waiting": None}) is None


def test_a_decision_seen_keeps_when_it_was_made_between_two_checks():
    """What the ETA measures a registry's processing from: per submission, submitted, the
    last check that saw nothing, seen; a later stage keeps the earlier stage's record."""
    r = rule(portal="crtc")
    mark = waiting.waiting({}, r, since=T0, now=T0 + 3 * H, what="staff",
                           submission="crtc_registration")
    first = waiting.decided({waiting.KEY: mark}, T0 + 4 * H)
    assert first == {"crtc_registration": {
        "portal": "crtc", "since": T0.isoformat(), "last_check": (T0 + 3 * H).isoformat(),
        "seen": (T0 + 4 * H).isoformat()}}
    listing = waiting.waiting({waiting.DECIDED: first}, r, since=T0 + 4 * H, now=T0 + 5 * H,
                              what="the list", submission="crtc_listing")
    both = waiting.decided({waiting.KEY: listing, waiting.DECIDED: first}, T0 + 6 * H)
    assert both is not None and set(both) == {"crtc_registration", "crtc_listing"}
    assert both["crtc_registration"] == first["crtc_registration"]
    # nothing to record: not waiting, or a marker written before markers named their
    # submission
    assert waiting.decided({}, T0) is None
    old = {k: v for k, v in mark.items() if k != "submission"}
    assert waiting.decided({waiting.KEY: old}, T0) is None


def test_a_decision_seen_in_the_submitting_run_is_kept_too():
    """No check saw the submission pending (the registry decided before the first look):
    the decision lies between the submission and the read that saw it. Without this the
    quick decisions would never be recorded and the learnt times would lean slow."""
    at_once = waiting.decided({}, T0 + 2 * H, first=("delaware_icis", "formation", T0))
    assert at_once == {"formation": {"portal": "delaware_icis", "since": T0.isoformat(),
                                     "last_check": T0.isoformat(),
                                     "seen": (T0 + 2 * H).isoformat()}}
    # a marker, when there is one, says more: its last check
    mark = waiting.waiting({}, rule(portal="crtc"), since=T0, now=T0 + H, what="staff",
                           submission="crtc_registration")
    seen = waiting.decided({waiting.KEY: mark}, T0 + 2 * H,
                           first=("crtc", "crtc_registration", T0))
    assert seen is not None and seen["crtc_registration"]["last_check"] == (T0 + H).isoformat()


def test_a_person_gets_the_evidence():
    exc = waiting.person_needed(rule(), name="formation", reference="PQ-7", submitted_at=T0,
                                mark={"checks": 4}, now=T0 + 30 * H)
    assert isinstance(exc, UncertainOutcome)
    text = str(exc)
    assert "PQ-7" in text and "2026-12-01 15:00" in text and "5 checks over 30.0 h" in text
    assert "found is authoritative" in text and "--not-filed" in text


def test_the_check_interval_override_is_for_tests(monkeypatch):
    monkeypatch.setenv("PORTALQ_PORTAL_CHECK_SECONDS", "2")
    r = lookups.rule("delaware_icis", "formation")
    assert r.check_every == r.check_cap == timedelta(seconds=2)
    assert r.lost_answer_window == 48 * H

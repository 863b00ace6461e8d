"""The ETA estimator (portals/eta/) on calendar edge cases, with synthetic snapshots and
fixed instants: no database, no clock."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from portalq.portals import eta
from portalq.portals.calendar import Closure, zone
from portalq.portals.eta import Duration, Job, PortalState, Snapshot
from portalq.portals.presets import calendar_from_preset
from portalq.portals.steps import STEPS

MIN = timedelta(minutes=1)
SEC = timedelta(seconds=1)
TEN = Duration(10 * MIN, 20 * MIN, measured=50)


def _utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def _snap(now, jobs, *, portal="irs_ein", sessions=1, closures=(), **kw):
    cal = calendar_from_preset(portal, closures=tuple(closures))
    state = PortalState(cal, sessions, **kw.pop("state", {}))
    return Snapshot(now=now, portals={portal: state}, jobs=jobs,
                    durations={(j.job_type, j.portal): TEN for j in jobs}, **kw)


def test_a_closed_weekend_starts_on_monday_at_opening():
    # Saturday 5 Dec 2026: the IRS opens Monday 07:00 ET (12:00 UTC)
    job = Job(1, "obtain_ein", "irs_ein", label="EIN")
    est = eta.estimate(_snap(_utc(2026, 12, 5, 15), [job]))[1]
    assert est.start50 == est.start90 == _utc(2026, 12, 7, 12)
    assert est.finish50 == _utc(2026, 12, 7, 12, 10)
    assert est.finish90 == _utc(2026, 12, 7, 12, 20)
    assert "irs_ein opens Mon 07:00 EST" in est.reasons
    line = eta.text(job, est, "America/New_York")
    assert line.startswith("EIN expected Mon 07 Dec 07:10 EST (by 07:20 at the latest)")


def test_the_cut_off_and_a_holiday_push_to_the_next_business_day():
    # Thu 24 Dec 21:50 ET: past the 15-minute cut-off before 22:00; Fri 25 is Christmas
    now = _utc(2026, 12, 25, 2, 50)
    est = eta.estimate(_snap(now, [Job(1, "obtain_ein", "irs_ein")]))[1]
    assert est.start50 == _utc(2026, 12, 28, 12)   # Monday 07:00 ET


def test_open_now_starts_now():
    now = _utc(2026, 12, 7, 15)   # Monday 10:00 ET
    est = eta.estimate(_snap(now, [Job(1, "obtain_ein", "irs_ein")]))[1]
    assert est.start50 == now and est.reasons == ()


def test_the_rate_limit_moves_the_second_ein_of_a_party_to_the_next_business_day():
    now = _utc(2026, 12, 11, 15)   # Friday 10:00 ET
    jobs = [Job(i, "obtain_ein", "irs_ein", run_at=now, rate_key="party-a", rate_limit=1,
                rate_words="one per responsible party per business day") for i in (1, 2)]
    jobs.append(Job(3, "obtain_ein", "irs_ein", run_at=now, rate_key="party-b", rate_limit=1))
    est = eta.estimate(_snap(now, jobs))
    assert est[1].start50 == now
    assert est[3].start50 == now + 10 * MIN        # another party: behind job 1 only
    assert est[2].start50 == _utc(2026, 12, 14, 12)   # Monday 07:00 ET (weekend between)
    assert "one per responsible party per business day" in est[2].reasons


def test_a_key_that_used_its_day_already_waits_for_the_next():
    now = _utc(2026, 12, 7, 15)
    job = Job(1, "obtain_ein", "irs_ein", rate_key="k", rate_limit=1)
    est = eta.estimate(_snap(now, [job], rate_used={("irs_ein", "k"): 1}))[1]
    assert est.start50 == _utc(2026, 12, 8, 12)


def test_backlog_with_concurrency_in_claim_order():
    now = _utc(2026, 12, 7, 15)   # Monday 10:00 ET, Delaware open
    jobs = [Job(i, "file_entity", "delaware_icis", run_at=now + i * timedelta(seconds=1))
            for i in range(1, 6)]
    jobs.append(Job(9, "file_entity", "delaware_icis", priority=5,
                    run_at=now + timedelta(seconds=9)))
    est = eta.estimate(_snap(now, jobs, portal="delaware_icis", sessions=2))
    sec = timedelta(seconds=1)
    # 1 and 2 start as they come due; the urgent job 9, due after them, goes before 3
    assert [est[i].start50 for i in (1, 2)] == [now + sec, now + 2 * sec]
    assert est[9].start50 == now + 10 * MIN + sec
    assert est[3].start50 == now + 10 * MIN + timedelta(seconds=2)
    assert est[5].ahead == 5 and est[5].start50 == now + 20 * MIN + timedelta(seconds=2)
    assert any("5 job(s) ahead on delaware_icis, 2 at a time" == r for r in est[5].reasons)
    # the p90 replay runs every job ahead at its p90 too
    assert est[5].start90 == now + 40 * MIN + timedelta(seconds=2)


def test_running_jobs_hold_their_sessions():
    now = _utc(2026, 12, 7, 15)
    snap = _snap(now, [Job(1, "obtain_ein", "irs_ein")],
                 state={"running": (now + 4 * MIN,)})
    est = eta.estimate(snap)[1]
    assert est.start50 == now + 4 * MIN and est.ahead == 1


def test_a_closure_moves_the_estimate():
    now = _utc(2026, 12, 7, 15)
    job = Job(1, "obtain_ein", "irs_ein")
    closed = Closure(now - MIN, _utc(2026, 12, 8, 15), "system conversion")
    est = eta.estimate(_snap(now, [job], closures=[closed]))[1]
    assert est.start50 == _utc(2026, 12, 8, 15)


def test_a_step_calendar_keeps_a_bc_job_until_paybc_opens():
    # Friday 21:30 PT: the registry is open, PayBC closed since 21:00 (opens Sat 00:00);
    # the registry opens Saturday 06:00 PT
    now = datetime(2026, 12, 11, 21, 30, tzinfo=zone("America/Vancouver")).astimezone(UTC)
    cal = calendar_from_preset("bc_corporate_online")
    state = PortalState(cal, 2, steps=(STEPS[("bc_corporate_online", "payment")],))
    job = Job(1, "name_search", "bc_corporate_online")
    est = eta.estimate(Snapshot(now, {"bc_corporate_online": state}, [job]))[1]
    local = est.start50.astimezone(zone("America/Vancouver"))
    assert (local.weekday(), local.hour, local.minute) == (5, 6, 0)   # Saturday 06:00
    alone = eta.estimate(Snapshot(now, {"bc_corporate_online": PortalState(cal, 2)}, [job]))
    assert alone[1].start50 == now   # the registry alone would start it at once


def test_a_paused_portal_gives_no_estimate_and_says_why():
    now = _utc(2026, 12, 7, 15)
    job = Job(1, "obtain_ein", "irs_ein", label="EIN")
    est = eta.estimate(_snap(now, [job], state={"paused": "operator"}))[1]
    assert est.start50 is None and est.finish90 is None
    assert eta.text(job, est, "UTC") == (
        "EIN: no estimate: irs_ein is paused (operator) until a person resumes it")
    probe = eta.estimate(_snap(now, [job], state={"paused": "breaker",
                                                  "resumes_at": now + 30 * MIN}))[1]
    assert probe.start50 == now + 30 * MIN


def test_held_steps_follow_their_predecessors_and_the_portals_processing():
    now = _utc(2026, 12, 7, 15)   # Monday 10:00 ET
    hours = timedelta(hours=1)
    de = calendar_from_preset("delaware_icis")
    irs = calendar_from_preset("irs_ein")
    filing = Job(1, "file_entity", "delaware_icis",
                 processing=Duration(24 * hours, 48 * hours))
    ein = Job(2, "obtain_ein", "irs_ein", after=(1,))
    deliver = Job(3, "deliver", "email", after=(1, 2))
    snap = Snapshot(now, {"delaware_icis": PortalState(de, 2), "irs_ein": PortalState(irs, 1),
                          "email": PortalState(calendar_from_preset("email"), 10)},
                    [filing, ein, deliver], durations={}, default_duration=TEN)
    est = eta.estimate(snap)
    assert est[1].submitted50 == now + 10 * MIN
    assert est[1].finish50 == now + 10 * MIN + 24 * hours
    assert est[2].start50 == est[1].finish50            # Tuesday 10:10 ET: open
    assert est[2].start90 == _utc(2026, 12, 9, 15, 20)  # Wednesday 10:20 ET
    assert est[3].start50 == est[2].finish50
    # a predecessor with no estimate holds its dependants without one
    failed = eta.estimate(Snapshot(now, snap.portals, [ein, deliver], default_duration=TEN))
    assert failed[2].finish50 is None and failed[3].finish50 is None
    # a predecessor done already: released now
    done = eta.estimate(Snapshot(now, snap.portals, [ein], default_duration=TEN,
                                 done={1: now - hours}))
    assert done[2].start50 == now


def test_a_job_waiting_on_the_portal_finishes_when_its_declared_time_is_up():
    now = _utc(2026, 12, 7, 15)
    proc = Duration(timedelta(hours=12), timedelta(hours=24))
    cal = calendar_from_preset("bc_corporate_online")
    just = Job(1, "name_search", "bc_corporate_online", submitted_at=now, next_check=now,
               processing=proc)
    est = eta.estimate(Snapshot(now, {"bc_corporate_online": PortalState(cal, 2)}, [just]))[1]
    assert est.finish50 == now + timedelta(hours=12)
    assert est.finish90 == now + timedelta(hours=24)


def test_a_decision_not_made_yet_is_further_off_than_its_declared_times():
    # 10 h after the submission, undecided: the median of what remains of a log-normal
    # through the declared 12 h / 24 h is past 12 h, and the p90 past 24 h (the plain
    # declared times put 39 % of the bench's finishes after the p90: docs/eta-accuracy.md)
    now = _utc(2026, 12, 7, 15)
    proc = Duration(timedelta(hours=12), timedelta(hours=24))
    cal = calendar_from_preset("bc_corporate_online")
    portals = {"bc_corporate_online": PortalState(cal, 2)}
    since = now - timedelta(hours=10)
    job = Job(1, "name_search", "bc_corporate_online", submitted_at=since,
              next_check=now + 30 * MIN, processing=proc)
    est = eta.estimate(Snapshot(now, portals, [job]))[1]
    assert since + timedelta(hours=14) < est.finish50 < since + timedelta(hours=18)
    assert est.finish90 > since + timedelta(hours=26)
    # three days overdue: still undecided means hours more, not "at the next check"
    overdue = Job(2, "name_search", "bc_corporate_online", submitted_at=now - timedelta(days=3),
                  next_check=now + 30 * MIN, processing=proc)
    late = eta.estimate(Snapshot(now, portals, [overdue]))[2]
    assert now + timedelta(hours=1) < late.finish50 < late.finish90
    # a next check after the conditional p50 still bounds it
    soon = Job(3, "name_search", "bc_corporate_online", submitted_at=now,
               next_check=now + timedelta(days=2), processing=proc)
    assert eta.estimate(Snapshot(now, portals, [soon]))[3].finish50 == now + timedelta(days=2)


def test_a_released_step_takes_its_place_in_claim_order_not_behind_the_whole_queue():
    # an EIN released at 10:10 ET goes before a job due tomorrow, and the second EIN of
    # a party (moved to tomorrow by the rate limit) does not hold every order's EIN behind
    # it (the accuracy replay found EINs estimated days late: docs/eta-accuracy.md)
    now = _utc(2026, 12, 7, 15)   # Monday 10:00 ET
    de, irs = calendar_from_preset("delaware_icis"), calendar_from_preset("irs_ein")
    portals = {"delaware_icis": PortalState(de, 2), "irs_ein": PortalState(irs, 1)}
    filing = Job(1, "file_entity", "delaware_icis")
    ein = Job(2, "obtain_ein", "irs_ein", after=(1,), rate_key="p", rate_limit=1)
    tomorrow = Job(3, "obtain_ein", "irs_ein", run_at=now + timedelta(days=1))
    twice = [Job(i, "obtain_ein", "irs_ein", run_at=now, rate_key="q", rate_limit=1)
             for i in (4, 5)]
    est = eta.estimate(Snapshot(now, portals, [filing, ein, tomorrow, *twice],
                                default_duration=TEN))
    assert est[4].start50 == now and est[5].start50 == _utc(2026, 12, 8, 12)
    assert est[2].start50 == now + 10 * MIN   # after its filing, before tomorrow's jobs
    assert est[2].reasons[0] == "after the order's earlier steps"
    assert est[3].start50 == now + timedelta(days=1)


def test_a_job_due_later_never_starts_before_it_is_due_on_a_free_session():
    # two filings due at 12:00 ET, two sessions free since 10:00: both start at 12:00 (the
    # replay once started the second on the free session at 10:00, before it was due; so
    # for rate-limited jobs too)
    now = _utc(2026, 12, 7, 15)   # Monday 10:00 ET
    noon = now + timedelta(hours=2)
    jobs = [Job(i, "file_entity", "delaware_icis", run_at=noon) for i in (1, 2)]
    est = eta.estimate(_snap(now, jobs, portal="delaware_icis", sessions=2))
    assert [est[i].start50 for i in (1, 2)] == [noon, noon]
    assert [est[i].start90 for i in (1, 2)] == [noon, noon]
    keyed = [Job(i, "obtain_ein", "irs_ein", run_at=noon, rate_key=f"p{i}", rate_limit=1)
             for i in (1, 2, 3)]
    est = eta.estimate(_snap(now, keyed, sessions=2))
    assert [est[i].start50 for i in (1, 2)] == [noon, noon]
    assert est[3].start50 == noon + 10 * MIN


def test_a_paused_portal_with_a_probe_says_so_for_every_job():
    now = _utc(2026, 12, 7, 15)
    jobs = [Job(1, "obtain_ein", "irs_ein"),
            Job(2, "obtain_ein", "irs_ein", rate_key="k", rate_limit=1)]
    est = eta.estimate(_snap(now, jobs, state={"paused": "breaker",
                                                "resumes_at": now + 30 * MIN}))
    for i in (1, 2):
        assert "irs_ein is paused (breaker), tried again Mon 15:30 UTC" in est[i].reasons


def test_a_portal_closed_for_more_than_a_year_gives_no_estimate_and_says_why():
    # the replay once started such jobs at "infinity" and failed rendering their reasons
    now = _utc(2026, 12, 7, 15)
    gone = Closure(now + timedelta(hours=1), now + timedelta(days=800), "decommissioned")
    jobs = [Job(i, "file_entity", "delaware_icis", run_at=now + i * 30 * MIN) for i in (1, 2, 3)]
    est = eta.estimate(_snap(now, jobs, portal="delaware_icis", closures=[gone]))
    assert est[1].start50 == now + 30 * MIN
    for i in (2, 3):
        assert est[i].start50 is None and est[i].finish90 is None
        assert "delaware_icis does not open within a year" in est[i].reasons
    # the same when every job is due already (the replay claims them as listed)
    due = [Job(i, "file_entity", "delaware_icis", priority=i % 2) for i in range(1, 20)]
    est = eta.estimate(_snap(now, due, portal="delaware_icis", closures=[gone]))
    started = [i for i in est if est[i].start50 is not None]
    assert 0 < len(started) < len(due)
    assert all(est[i].start50 < now + timedelta(hours=1) for i in started)
    assert all("delaware_icis does not open within a year" in est[i].reasons
               for i in est if i not in started)


# Delaware's lookup (portals/lookups.py): 15 min after the submission, then doubling up to
# every 4 h -- checks at 0:15, 0:45, 1:45, 3:45, 7:45, 11:45, ... 23:45, 27:45
DE_CHECKS = eta.Checks(15 * MIN, 2.0, timedelta(hours=4))


def test_checks_back_off_to_their_cap():
    hours = [DE_CHECKS.at(k) / 3600 for k in range(1, 8)]
    assert hours == [0.25, 0.75, 1.75, 3.75, 7.75, 11.75, 15.75]
    # decided at 24 h: seen at 27:45; a check at the decision sees it
    assert DE_CHECKS.at(DE_CHECKS.index(24 * 3600)) == 27.75 * 3600
    assert DE_CHECKS.at(DE_CHECKS.index(3.75 * 3600)) == 3.75 * 3600
    assert DE_CHECKS.index(1) == 1 and DE_CHECKS.index(12 * 3600) == 7
    flat = eta.Checks(2 * timedelta(hours=1), 1.0, 2 * timedelta(hours=1))
    assert flat.at(flat.index(25 * 3600)) == 26 * 3600


def test_a_decision_is_seen_at_the_first_check_after_it():
    # submitted Monday 10:10 ET (p50; 10:20 at the p90), decided 24 h (p50) / 48 h (p90)
    # later, seen at the check after, as the service runs them: 10:25, 10:55, 11:55, 13:55,
    # 17:55, 21:55, then 01:55 falls in Delaware's closed night and runs at its 08:00
    # opening, and the checks go on from there, 4 h apart: the Tuesday 10:10 decision is
    # seen at 12:00, the Wednesday one at 12:00 on Wednesday
    now = _utc(2026, 12, 7, 15)
    filing = Job(1, "file_entity", "delaware_icis",
                 processing=Duration(timedelta(hours=24), timedelta(hours=48)),
                 checks=DE_CHECKS)
    est = eta.estimate(_snap(now, [filing], portal="delaware_icis", sessions=2))[1]
    assert est.submitted50 == _utc(2026, 12, 7, 15, 10)
    assert est.finish50 == _utc(2026, 12, 8, 17) and est.finish90 == _utc(2026, 12, 9, 17)


def test_a_waiting_decision_is_seen_on_its_lookups_schedule():
    # submitted 20 h ago; the check at 19:45 found nothing, the next is at 23:45: the
    # decision is after 19:45 (not after now: one made since is not seen yet), and is
    # seen at one of the checks 23:45, 27:45, ... after it
    now = _utc(2026, 12, 7, 15)
    since = now - timedelta(hours=20)
    proc = Duration(timedelta(hours=24), timedelta(hours=48))
    job = Job(1, "file_entity", "delaware_icis", submitted_at=since,
              next_check=since + timedelta(hours=23, minutes=45), processing=proc,
              checks=DE_CHECKS)
    est = eta.estimate(_snap(now, [job], portal="delaware_icis"))[1]
    # the median of a log-normal through 24 h / 48 h past 19:45 is 30.9 h (Monday 20:54
    # ET): seen at the check at 31:45 (21:45 ET, the next ones 4 h apart from 13:45)
    assert est.finish50 == since + timedelta(hours=31, minutes=45)
    # the p90 (54.6 h: Tuesday 20:38 ET) comes after Tuesday's last check (the night's
    # check ran at the 08:00 opening, then 12:00, 16:00, 20:00): seen when Delaware opens
    # on Wednesday, 08:00 ET
    assert est.finish90 == _utc(2026, 12, 9, 13)
    # a check running late keeps its gaps from where it is
    late = Job(2, "file_entity", "delaware_icis", submitted_at=since,
               next_check=since + timedelta(hours=23, minutes=50), processing=proc,
               checks=DE_CHECKS)
    moved = eta.estimate(_snap(now, [late], portal="delaware_icis"))[2]
    assert moved.finish50 == since + timedelta(hours=31, minutes=50)


def test_a_decision_made_while_the_portal_is_closed_is_seen_at_its_opening():
    # a lookup is a job of the portal: the tick defers it while the portal is closed, so
    # a Delaware filing submitted Friday 10:00 ET and decided ~Saturday is seen on Monday
    # at 08:00 ET, not on Saturday 13:45 at the check after 24 h
    now = _utc(2026, 12, 11, 15)   # Friday 10:00 ET
    proc = Duration(timedelta(hours=24), timedelta(hours=48))
    filing = Job(1, "file_entity", "delaware_icis", processing=proc, checks=DE_CHECKS)
    est = eta.estimate(_snap(now, [filing], portal="delaware_icis", sessions=2))[1]
    monday = _utc(2026, 12, 14, 13)   # 08:00 ET
    assert est.submitted50 < _utc(2026, 12, 11, 16)
    assert est.finish50 == monday and est.finish90 == monday
    # waiting since Thursday 10:00 ET, the check at 19:45 after it saw nothing: its
    # decision is due Friday 16:54 ET and after (30.9 h) -- the p90, past Friday's 22:15
    # last start, on Monday
    since = _utc(2026, 12, 10, 15)
    job = Job(2, "file_entity", "delaware_icis", submitted_at=since,
              next_check=since + timedelta(hours=23, minutes=45), processing=proc,
              checks=DE_CHECKS)
    waiting = eta.estimate(_snap(now, [job], portal="delaware_icis"))[2]
    # its next check was due at 09:45 and runs now, 10:00 (overdue), the next ones 4 h
    # apart: the one at 18:00 ET sees the median
    assert waiting.finish50 == now + timedelta(hours=8)
    assert waiting.finish90 == monday


def test_a_check_a_closure_moved_conditions_on_the_check_that_ran():
    # submitted Friday 10:00 ET; the last check ran Friday 22:00 ET and saw nothing; the
    # next one was deferred to Monday 08:00 (Delaware is closed on the weekend). The
    # decision is only known to come after Friday 22:00 (12 h), not after the check the
    # schedule alone puts just before Monday (~62 h): its median (~25 h) is Saturday,
    # seen Monday at 08:00 -- not at 16:00, after a median past 62 h
    since = _utc(2026, 12, 11, 15)
    monday = _utc(2026, 12, 14, 13)
    proc = Duration(timedelta(hours=24), timedelta(hours=48))
    job = Job(1, "file_entity", "delaware_icis", submitted_at=since, next_check=monday,
              processing=proc, checks=DE_CHECKS, last_check=since + timedelta(hours=12))
    now = _utc(2026, 12, 12, 17)   # Saturday
    est = eta.estimate(_snap(now, [job], portal="delaware_icis"))[1]
    assert est.finish50 == monday
    unknown = dataclasses.replace(job, last_check=None)
    assert eta.estimate(_snap(now, [unknown], portal="delaware_icis"))[1].finish50 == \
        monday + timedelta(hours=8)


def test_checks_every_zero_seconds_still_give_an_estimate():
    # PORTALQ_PORTAL_CHECK_SECONDS=0 (tests, demos) makes every interval and cap 0
    now = _utc(2026, 12, 7, 15)
    zero = eta.Checks(timedelta(0), 2.0, timedelta(0))
    proc = Duration(timedelta(hours=1), timedelta(hours=2))
    jobs = [Job(1, "file_entity", "delaware_icis", processing=proc, checks=zero),
            Job(2, "file_entity", "delaware_icis", submitted_at=now - timedelta(minutes=5),
                next_check=now, processing=proc, checks=zero, last_check=now)]
    est = eta.estimate(_snap(now, jobs, portal="delaware_icis", sessions=2))
    assert est[1].finish50 is not None and est[2].finish50 is not None
    assert est[2].finish50 - now < timedelta(hours=2)


def test_a_run_past_its_median_is_expected_to_end_later_not_now():
    now = _utc(2026, 12, 7, 15)
    run = Duration(3 * MIN, 6 * MIN)
    # a minute in, the median is barely moved (2 % of runs are that short)
    assert now + 2 * MIN < eta.run_end(now - MIN, run, now) < now + 2 * MIN + 10 * SEC
    late = eta.run_end(now - 5 * MIN, run, now)
    assert now + MIN < late < now + 4 * MIN                        # in the tail, not "now"


def test_a_running_predecessors_decision_is_seen_in_its_portals_hours():
    # Monday 21:00 ET: a Delaware filing running, submitted at 21:10 (its expected end),
    # decided 2 h (p50) / 4 h (p90) later. Its checks run 21:25, 21:55; the next, 22:55,
    # falls after Delaware's 22:30 close and runs at Tuesday's 08:00 opening, which sees
    # it either way. So the EIN that follows starts at 08:00 ET, not at the IRS's 07:00
    # (the decision's instant plus its checks, hours aside, said 00:55)
    now = _utc(2026, 12, 8, 2)
    de, irs = calendar_from_preset("delaware_icis"), calendar_from_preset("irs_ein")
    running = eta.Running("delaware_icis", _utc(2026, 12, 8, 2, 10),
                          Duration(timedelta(hours=2), timedelta(hours=4)), DE_CHECKS)
    ein = Job(2, "obtain_ein", "irs_ein", after=(1,))
    snap = Snapshot(now, {"delaware_icis": PortalState(de, 2), "irs_ein": PortalState(irs, 1)},
                    [ein], default_duration=TEN, running={1: running})
    est = eta.estimate(snap)
    assert est[2].start50 == est[2].start90 == _utc(2026, 12, 8, 13)
    assert est.running() == {1: (_utc(2026, 12, 8, 13), _utc(2026, 12, 8, 13))}
    # a run that leaves nothing to decide: done at its end
    plain = dataclasses.replace(running, processing=None)
    est = eta.estimate(dataclasses.replace(snap, running={1: plain}))
    assert est[2].start50 == _utc(2026, 12, 8, 2, 10)   # 21:10 ET: the IRS is open
    assert est.running()[1] == (_utc(2026, 12, 8, 2, 10),) * 2

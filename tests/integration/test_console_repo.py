"""The console's queries and actions on a real database: keyset pages, bounded windows,
time ranges through ids, payload search, indexed plans; actions audited atomically."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from portalq.jobs import audit, queue
from portalq.jobs.admin import actions as console_actions
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin.reads import JobFilter
from portalq.jobs.audit import Actor
from portalq.jobs.db.sql import query
from portalq.jobs.errors import IllegalTransition, InputError
from tests import payloads
from tests.checkpoints import in_doubt, state

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
OPS = Actor("ops", "operator")


def _fill(c, n: int, status: str = "completed", job_type: str = "name_search",
          start: datetime = T0) -> None:
    """n jobs, one a minute from ``start``, ids rising with created_at."""
    c.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at, created_at,
                               updated_at, finished_at)
        SELECT %(t)s, 'O-' || g, 'bc_corporate_online',
               jsonb_build_object('names', jsonb_build_array('Name ' || g),
                                  'legal_name', 'Co ' || g, 'note', 'Co ' || g),
               %(s)s, %(start)s + g * interval '1 minute', %(start)s + g * interval '1 minute',
               %(start)s, CASE WHEN %(s)s IN ('completed', 'failed', 'cancelled')
                               THEN %(start)s + g * interval '1 minute' END
        FROM generate_series(1, %(n)s) g""", {"t": job_type, "s": status, "n": n,
                                               "start": start})


def test_keyset_pages_walk_every_job_once_newest_first(conn):
    _fill(conn, 130)
    seen, before, pages = [], None, 0
    while True:
        page = console_repo.jobs_page(conn, JobFilter(), before_id=before, limit=50)
        seen += [r["id"] for r in page.rows]
        pages += 1
        if page.next_before is None:
            break
        before = page.next_before
    assert pages == 3 and seen == sorted(seen, reverse=True) and len(set(seen)) == 130


def test_a_window_with_too_few_matches_says_where_it_stopped(conn):
    _fill(conn, 300)
    _fill(conn, 3, job_type="name_search", status="failed")
    conn.execute("UPDATE portalq.job_queue SET order_id = 'RARE' WHERE id IN (5, 250)")
    # a field without a trigram index of its own ("note"): the window's search
    page = console_repo.jobs_page(conn, JobFilter(field="note", value="co 5"),
                                  window=100, limit=50)
    # ids 303..204 read: none of "Co 5", "Co 50".."Co 59" is among them
    assert page.partial and page.scanned == 100 and page.next_before == 204
    assert page.rows == []
    rest = console_repo.jobs_page(conn, JobFilter(field="note", value="co 5"),
                                  before_id=page.next_before, window=1000)
    assert [r["id"] for r in rest.rows] == [59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 5]
    assert not rest.partial and rest.next_before is None
    # a searchable field (migration 0026): its index finds them all in the first page
    indexed = console_repo.jobs_page(conn, JobFilter(field="legal_name", value="co 5"),
                                     window=100, limit=50)
    assert [r["id"] for r in indexed.rows] == [59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 5]
    assert not indexed.partial and indexed.next_before is None


def test_filters_status_type_order_and_time_range(conn):
    _fill(conn, 100)                                   # ids 1..100, T0+1..100 min
    _fill(conn, 5, status="failed", job_type="name_search", start=T0 + timedelta(hours=3))
    conn.execute("UPDATE portalq.job_queue SET order_id = 'ORD-X' WHERE id IN (3, 4)")
    assert [r["id"] for r in console_repo.jobs_page(conn, JobFilter(status="failed")).rows] \
        == [105, 104, 103, 102, 101]
    assert [r["id"] for r in console_repo.jobs_page(conn, JobFilter(order_id="ORD-X")).rows] \
        == [4, 3]
    rng = JobFilter(created_from=T0 + timedelta(minutes=10), created_to=T0 +
                    timedelta(minutes=20))
    assert [r["id"] for r in console_repo.jobs_page(conn, rng).rows] == list(range(19, 9, -1))
    assert console_repo.first_id_at_or_after(conn, T0) == 1
    assert console_repo.first_id_at_or_after(conn, T0 + timedelta(days=9)) is None
    with pytest.raises(InputError, match="secret field"):
        console_repo.jobs_page(conn, JobFilter(field="responsible_party.ssn", value="1"))
    with pytest.raises(InputError, match="unknown status"):
        console_repo.jobs_page(conn, JobFilter(status="done"))


def _plan(conn, name: str, params: dict) -> str:
    with conn.transaction():
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + query(name), params).fetchone()[0]
    return json.dumps(plan)


def test_list_and_overview_read_indexes_not_the_finished_bulk(conn):
    _fill(conn, 50_000)
    _fill(conn, 20, status="failed")
    _fill(conn, 20, status="pending")
    conn.execute("ANALYZE portalq.job_queue")
    base = {**JobFilter().params(), "before_id": 2**62, "floor_id": 0, "window": 20000,
            "limit": 50}
    assert "job_queue_failed_id" in _plan(conn, "console_jobs_page",
                                          {**base, "status": "failed"})
    assert "job_queue_waiting_id" in _plan(conn, "console_jobs_page",
                                           {**base, "status": "pending"})
    depth = _plan(conn, "console_depth", {})
    assert '"Seq Scan"' not in depth, depth
    # the last day of a month of history
    through = _plan(conn, "console_throughput", {"since": T0 + timedelta(minutes=49_000)})
    assert '"Seq Scan"' not in through, through


# --- actions ---------------------------------------------------------------------------------

def _failed_ein(conn, doubt: bool = True) -> int:
    job_id = queue.enqueue("obtain_ein", "ORD-1", payloads.OBTAIN_EIN, conn=conn).id
    cp = {**(in_doubt("ein_application") if doubt else {}), "identity": "done"}
    conn.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 1, checkpoint = %s "
                 "WHERE id = %s", (json.dumps(cp), job_id))
    return job_id


def test_not_filed_resumes_and_is_audited_with_masked_before_and_after(conn):
    job_id = _failed_ein(conn)
    console_actions.not_filed(conn, OPS, job_id, "not on the portal")
    job = queue.get_job(job_id, conn)
    assert job["status"] == "pending" and state(job["checkpoint"], "ein_application") == "not_filed"
    [row] = audit.entries(conn, target=f"job:{job_id}")
    assert (row["action"], row["actor"], row["reason"]) == ("job.not_filed", "ops",
                                                           "not on the portal")
    assert row["before"]["status"] == "failed" and row["after"]["status"] == "pending"
    # the SSN's last four, as a number of its own (a timestamp's microseconds may hold
    # the same digits: 16:17:34.678904 once did)
    text = json.dumps(row, default=str)
    assert not re.search(r"(?<![\d.])6789(?!\d)", text)
    assert not any(form in text for form in ("123-45-6789", "123456789", "123 45 6789"))


def test_a_refused_action_writes_no_audit_row(conn):
    job_id = queue.enqueue("name_search", "ORD-2", payloads.NAME_SEARCH, conn=conn).id
    with pytest.raises(IllegalTransition):
        console_actions.retry(conn, OPS, job_id, "retry a pending job")
    with pytest.raises(InputError, match="reason"):
        console_actions.cancel(conn, OPS, job_id, "  ")
    assert audit.entries(conn) == [] and queue.get_job(job_id, conn)["status"] == "pending"


def test_bulk_retry_of_a_selection_skips_jobs_whose_state_forbids_it(conn):
    a, b = _failed_ein(conn), _failed_ein(conn)
    c = queue.enqueue("name_search", "ORD-3", payloads.NAME_SEARCH, conn=conn).id
    result = console_actions.bulk(conn, OPS, "retry", [a, b, c], "portal fixed",
                                  scope={"selected": [a, b, c]})
    assert result == {"done": [a, b], "skipped": [c]}
    [row] = audit.entries(conn, action="jobs.bulk_retry")
    assert row["after"] == {"done": [a, b], "skipped": [c]}


def test_each_job_of_a_bulk_action_has_its_own_audit_entry(conn):
    """Issue 48 #14: a bulk-retried job's own audit log (/audit?target=job:N) says it was
    retried, by whom, why, from what state, and which bulk action did it."""
    a, b = _failed_ein(conn), _failed_ein(conn)
    c = queue.enqueue("name_search", "ORD-3", payloads.NAME_SEARCH, conn=conn).id
    console_actions.bulk(conn, OPS, "retry", [a, b, c], "portal fixed",
                         scope={"selected": [a, b, c]})
    [bulk] = audit.entries(conn, action="jobs.bulk_retry")
    for job_id in (a, b):
        [row] = audit.entries(conn, target=f"job:{job_id}")
        assert (row["action"], row["actor"], row["reason"]) == ("job.retry", "ops",
                                                               "portal fixed")
        assert row["before"]["status"] == "failed" and row["after"]["status"] == "pending"
        assert row["after"]["bulk"] == bulk["id"]
        assert "6789" not in json.dumps(row, default=str).replace(str(row["at"]), "")
    assert audit.entries(conn, target=f"job:{c}") == []          # skipped: not touched
    console_actions.bulk(conn, OPS, "cancel", [c], "duplicate", scope={"selected": [c]})
    [row] = audit.entries(conn, target=f"job:{c}")
    assert row["action"] == "job.cancel" and row["after"]["status"] == "cancelled"


def test_escalation_acknowledge_assign_resolve(conn):
    job_id = _failed_ein(conn)
    esc = queue.escalate(conn, job_id, 1, "uncertain", "maybe filed")
    for what in ("acknowledge", "assign", "resolve"):
        console_actions.escalation(conn, OPS, esc, what, f"{what} it")
    assert console_repo.escalations_inbox(conn) == []
    [row] = console_repo.escalations_inbox(conn, include_resolved=True)
    assert (row["acknowledged_by"], row["assigned_to"], row["resolved_by"]) == ("ops",) * 3
    with pytest.raises(IllegalTransition):
        console_actions.escalation(conn, OPS, esc, "assign", "again")
    assert len(audit.entries(conn, target=f"job:{job_id}")) == 3


def test_portal_pause_resume_closure_audited(conn):
    console_actions.pause_portal(conn, OPS, "crtc", "maintenance")
    with pytest.raises(IllegalTransition):
        console_actions.pause_portal(conn, OPS, "crtc", "again")
    console_actions.resume_portal(conn, OPS, "crtc", "back")
    console_actions.add_closure(conn, OPS, "crtc", T0, T0 + timedelta(hours=1), "upgrade")
    with pytest.raises(InputError):
        console_actions.add_closure(conn, OPS, "nope", T0, T0 + timedelta(hours=1), "x")
    assert [r["action"] for r in audit.entries(conn)] == ["portal.close", "portal.resume",
                                                          "portal.pause"]


def test_sessions_end_when_idle_or_when_the_user_is_disabled(conn):
    from portalq.jobs import clock
    from portalq.jobs.admin import users as console_users

    frozen = clock.FrozenClock(T0)
    clock.set_clock(frozen)
    user = console_users.add_user(conn, "ada", "operator", "a long enough password")
    who = console_users.authenticate(conn, "ada", "a long enough password")
    assert who is not None and console_users.authenticate(conn, "ada", "wrong") is None
    token = console_users.start_session(conn, who)
    idle = timedelta(minutes=30)
    frozen.advance(minutes=29)
    assert console_users.session_user(conn, token, idle).name == "ada"
    frozen.advance(minutes=29)  # active 29 min ago: still live
    assert console_users.session_user(conn, token, idle) is not None
    frozen.advance(minutes=31)
    assert console_users.session_user(conn, token, idle) is None
    token = console_users.start_session(conn, who)
    console_users.disable(conn, user["name"])
    assert console_users.session_user(conn, token, idle) is None
    assert console_users.authenticate(conn, "ada", "a long enough password") is None
    with psycopg.connect(conn.info.dsn) as other:  # stored as Argon2id, never the password
        digest = other.execute("SELECT password_hash FROM portalq.console_users").fetchone()[0]
    assert digest.startswith("$argon2id$") and "long enough" not in digest


def test_closure_removed_and_hours_set_audited(conn):
    from datetime import time as dtime

    from portalq.jobs.db import sql

    closure = console_actions.add_closure(conn, OPS, "crtc", T0, T0 + timedelta(hours=2), "x")
    with pytest.raises(InputError):
        console_actions.remove_closure(conn, OPS, "irs_ein", closure, "wrong portal")
    console_actions.remove_closure(conn, OPS, "crtc", closure, "maintenance called off")
    assert conn.execute("SELECT count(*) FROM portalq.portal_closures").fetchone()[0] == 0
    console_actions.set_hours(conn, OPS, "crtc", [(0, dtime(8), dtime(18))], "winter hours")
    assert [(r["weekday"], r["opens"], r["closes"]) for r in sql.fetch(conn, "portal_hours")
            if r["portal"] == "crtc"] == [(0, dtime(8), dtime(18))]
    row = audit.entries(conn, action="portal.set_hours")[0]
    assert row["after"] == {"hours": [[0, "08:00:00", "18:00:00"]]} and row["before"]["hours"]
    assert [r["action"] for r in audit.entries(conn)][:2] == ["portal.set_hours",
                                                              "portal.reopen"]

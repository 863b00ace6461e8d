"""What the "Needs you" page lists (jobs.admin.needs) on a real database: each sort read
from its cause, gone when the cause goes, failed jobs grouped by cause, the count in the
navigation the same as the page's items, and the queries on indexes."""

from __future__ import annotations

import json
from datetime import timedelta

from portalq.jobs import clock, queue
from portalq.jobs.admin import needs as console_needs
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.audit import Actor
from portalq.jobs.db.sql import query
from portalq.jobs.operations import approvals, questions
from tests.needs_seed import seed

OPS = Actor("ops", "operator")


def _listed(conn) -> dict[str, set[int]]:
    page = console_needs.page(conn)
    return {"question": {q["job_id"] for q in page["questions"]},
            "approval": {a["job_id"] for a in page["approvals"]},
            "uncertain": {u["id"] for u in page["uncertain"]},
            "waiting": {w["id"] for w in page["waiting"]},
            "failed": {i for g in page["failed"] for i in g.ids}}


def test_each_sort_comes_from_its_cause_and_goes_with_it(conn, dsn, tmp_path):
    ids = seed(dsn, tmp_path, outage=4, tag="INT")
    page = console_needs.page(conn)
    assert page["total"] == 4 + 4 == console_repo.needs_you(conn)
    [group] = page["failed"]
    assert (len(group.ids), group.cause, group.portal, group.retry_helps) == (
        4, "PortalUnavailable: IRS answered # for request #", "irs_ein", True)
    [approval] = page["approvals"]
    assert approval["review"]["path"].endswith("03-review-for-approval.png")
    assert approval["digest"].startswith("9f2c")
    [uncertain] = page["uncertain"]
    assert uncertain["submissions"] == ["ein_application"]

    questions.answer(conn, ids["question"], "483920", by="ops")
    approvals.decide(conn, OPS, ids["approval"], "approved", "checked")
    for job_id in ids["outage"][:3]:
        queue.retry(job_id, actor="ops", note="back", conn=conn)
    conn.execute("UPDATE portalq.job_queue SET checkpoint = jsonb_set(checkpoint, "
                 "'{waiting,expected_by}', to_jsonb(%s::text)) WHERE id = %s",
                 ((clock.now() + timedelta(days=1)).isoformat(), ids["waiting"]))
    listed = _listed(conn)
    assert listed == {"question": set(), "approval": set(), "uncertain": {ids["uncertain"]},
                      "waiting": set(), "failed": {ids["outage"][3]}}
    assert console_repo.needs_you(conn) == 2
    queue.resolve_not_filed(ids["uncertain"], actor="ops", note="not on the IRS", conn=conn)
    assert _listed(conn)["uncertain"] == set()


def _fail(conn, error: str | None, kind: str = "business",
          checkpoint: dict | None = None) -> int:
    job_id = queue.enqueue("name_search", "ORD-F", {
        "jurisdiction": "BC", "names": ["A Ltd."],
        "applicant": {"name": "A", "email": "a@example.test", "phone": "604-555-0100"}},
        conn=conn).id
    conn.execute("UPDATE portalq.job_queue SET status = 'failed', last_error = %s, "
                 "checkpoint = %s, finished_at = now() WHERE id = %s",
                 (error, json.dumps(checkpoint or {}), job_id))
    queue.escalate(conn, job_id, 1, kind, "failed")
    return job_id


def test_a_refused_business_cause_offers_no_bulk_retry(conn):
    ids = [_fail(conn, f"name rejected (request {i})") for i in (1, 2)]
    [group] = console_needs.failed_groups(conn)
    assert group.ids == ids and not group.retry_helps and console_needs.uncertain(conn) == []
    assert "no bulk action" in group.advice and group.sample == "name rejected (request 1)"


ERRORS = ["  IRS answered 503 for order 17\nTraceback ...", "IRS answered 503 for order 18",
          "\r\n\tline one 12\rline two", None, "   ", "x" * 250 + "9" * 30, "ünïcode ٣ 42"]


def test_the_database_groups_by_the_cause_cause_of_states(conn):
    ids = [_fail(conn, e) for e in ERRORS]
    in_doubt = _fail(conn, "no answer after submit", "uncertain",
                     {"submissions": {"ein_application": {"state": "submitting",
                                                          "reference": "R1"}}})
    groups = {g.cause: g.ids for g in console_needs.failed_groups(conn)}
    expected: dict[str, list[int]] = {}
    for job_id, error in zip(ids, ERRORS, strict=True):
        expected.setdefault(console_needs.cause_of(error), []).append(job_id)
    assert groups == expected
    assert groups["IRS answered # for order #"] == ids[:2]
    assert groups["no error recorded"] == ids[3:5]
    [doubt] = console_needs.uncertain(conn)
    assert doubt["id"] == in_doubt and doubt["submissions"] == ["ein_application"]


def test_a_group_larger_than_a_bulk_action_carries_its_count_and_its_oldest_ids(
        conn, monkeypatch):
    """A bulk action takes at most BULK_CAP jobs: a larger group (an outage that failed
    fifty thousand) counts them all but carries only its oldest BULK_CAP ids -- what its
    Retry button can act on, and all the page has to hold."""
    monkeypatch.setattr(console_needs, "BULK_CAP", 2)
    ids = [_fail(conn, f"IRS answered 503 for order {n}") for n in range(3)]
    [group] = console_needs.failed_groups(conn)
    assert (group.count, group.ids, group.capped) == (3, ids[:2], True)


def _plan(conn, name: str, params: dict) -> str:
    with conn.transaction():
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + query(name), params).fetchone()[0]
    return json.dumps(plan)


def test_the_needs_queries_read_indexes_not_the_finished_bulk(conn):
    conn.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                       created_at, updated_at, finished_at)
        SELECT 'name_search', 'O-' || g, 'bc_corporate_online', '{}', 'completed', now(),
               now(), now(), now() FROM generate_series(1, 50000) g""")
    conn.execute("ANALYZE portalq.job_queue")
    params = {"now": clock.now(), "limit": 200, "cap": 1000, "ids_cap": 10_000}
    for name in ("console_needs_failed_groups", "console_needs_uncertain",
                 "console_needs_waiting",
                 "console_needs_waiting_count"):
        plan = _plan(conn, name, params)
        assert '"Seq Scan"' not in plan, (name, plan)


def test_a_count_read_across_a_change_is_not_kept_as_fresh(conn):
    """The navigation's count is cached for the refresh period and dropped by every change
    the console hears of. A count whose read overlapped a change (it may predate the change)
    must not be kept as fresh: CI saw the navigation stay at 3 after an answer took it to 2,
    a page's count read racing the answer's commit and invalidation."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from portalq.scheduler.console.pages_overview import Snapshots

    reads = []

    @contextmanager
    def db():
        reads.append(1)
        yield conn
        if len(reads) == 1:          # a write committed and heard of while this read ran
            _fail(conn, "name rejected (later)")
            snapshots.invalidate()

    console = SimpleNamespace(settings=SimpleNamespace(live_refresh_seconds=3600), db=db)
    snapshots = Snapshots(console)  # type: ignore[arg-type]
    _fail(conn, "name rejected (first)")
    assert snapshots.needs_you() == 1   # this read's own count
    assert snapshots.needs_you() == 2 and len(reads) == 2   # read again, not kept a period
    assert snapshots.needs_you() == 2 and len(reads) == 2   # now fresh: kept

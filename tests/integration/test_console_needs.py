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


def test_a_refused_business_cause_offers_no_bulk_retry():
    rows = [{"id": i, "portal": "bc_corporate_online", "job_type": "name_search",
             "kind": "business", "last_error": f"name rejected (request {i})",
             "checkpoint": {}, "finished_at": None} for i in (1, 2)]
    [group], uncertain = console_needs.group_failed(rows)
    assert group.ids == [1, 2] and not group.retry_helps and uncertain == []
    assert "no bulk action" in group.advice


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
    params = {"now": clock.now(), "limit": 200, "cap": 1000}
    for name in ("console_needs_failed", "console_needs_waiting",
                 "console_needs_waiting_count"):
        plan = _plan(conn, name, params)
        assert '"Seq Scan"' not in plan, (name, plan)

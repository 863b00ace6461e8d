"""The console's orders list and per-status counts on a real database (issue 48): orders
in the order a person should look at them -- blocked, at risk, on their way, then done and
cancelled ones, newest first -- and the jobs list's counts exact while the table is small,
the statistics' estimates beyond (a bounded read either way)."""

from __future__ import annotations

from portalq.jobs import clock, queue
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.business import order_runs
from portalq.scheduler.console import orders_view
from tests import payloads
from tests.order_inputs import BC_COMPANY, DELAWARE_LLC


def _states(conn) -> list[tuple[str, str]]:
    return [(o["order_id"], o["state"]) for o in orders_view.listing(conn)]


def test_orders_come_blocked_at_risk_open_then_finished_newest_first(conn):
    made = {name: order_runs.enqueue_order(kind, name, data, conn=conn) for name, kind, data in (
        ("ORD-DONE", "bc_company", BC_COMPANY), ("ORD-OPEN-OLD", "bc_company", BC_COMPANY),
        ("ORD-CANCELLED", "bc_company", BC_COMPANY), ("ORD-BLOCKED", "bc_company", BC_COMPANY),
        ("ORD-RISK", "delaware_llc", DELAWARE_LLC), ("ORD-OPEN-NEW", "bc_company", BC_COMPANY))}
    conn.execute("UPDATE portalq.job_queue SET status = 'completed', finished_at = %s "
                 "WHERE id = ANY(%s)", (clock.now(), list(made["ORD-DONE"].jobs.values())))
    order_runs.cancel_order("ORD-CANCELLED", reason="the client withdrew", conn=conn)
    conn.execute("UPDATE portalq.job_queue SET status = 'failed', finished_at = %s "
                 "WHERE id = %s", (clock.now(), made["ORD-BLOCKED"].jobs["name_search"]))
    queue.pause_portal("delaware_icis", reason="maintenance", conn=conn)
    assert _states(conn) == [("ORD-BLOCKED", "blocked"), ("ORD-RISK", "at-risk"),
                             ("ORD-OPEN-NEW", "on-its-way"), ("ORD-OPEN-OLD", "on-its-way"),
                             ("ORD-CANCELLED", "cancelled"), ("ORD-DONE", "done")]
    [risky] = [o for o in orders_view.listing(conn) if o["order_id"] == "ORD-RISK"]
    assert risky["risks"] and "file_entity" in risky["risks"][0]


def test_status_counts_are_exact_while_the_table_is_small(conn, monkeypatch):
    ids = [queue.enqueue("name_search", f"ORD-{i}", payloads.NAME_SEARCH, conn=conn).id
           for i in range(6)]
    conn.execute("ANALYZE portalq.job_queue")          # the statistics: 6 pending
    conn.execute("UPDATE portalq.job_queue SET status = 'cancelled' WHERE id = ANY(%s)",
                 (ids[:4],))
    assert console_repo.status_counts(conn) == ({"cancelled": 4, "pending": 2}, True)
    monkeypatch.setattr(console_repo, "EXACT_COUNTS_UP_TO", 5)   # beyond: the estimates
    assert console_repo.status_counts(conn) == ({"pending": 6}, False)


def test_the_orders_pages_share_the_estimators_snapshot_until_a_change(conn):
    changes = [0]
    latest = orders_view.Latest(3600, lambda: changes[0])
    order_runs.enqueue_order("bc_company", "ORD-SHARED", BC_COMPANY, conn=conn)
    first = latest.get(conn)
    assert orders_view.pipeline(conn, "ORD-SHARED", latest) is not None
    orders_view.listing(conn, latest)
    assert latest.get(conn) is first and latest.loads == 1
    changes[0] += 1                                   # a notification, a write
    assert latest.get(conn) is not first and latest.loads == 2
    expired = orders_view.Latest(0, lambda: 0)        # and never older than its period
    assert expired.get(conn) is not expired.get(conn)

"""Per-key rate limits: one EIN per responsible party per IRS day, across nodes."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from jobs import clock, queue
from tests import payloads
from tests.service_helpers import Service, add_local_portal, wait_until

TUE_10_ET = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
WED_07_ET = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _ein(ssn: str) -> dict:
    return {**payloads.OBTAIN_EIN, "responsible_party": {
        **payloads.OBTAIN_EIN["responsible_party"], "ssn": ssn}}


@pytest.mark.parametrize("nodes", [1, 2])
def test_second_ein_same_party_same_day_is_deferred_to_next_portal_day(db, dsn, tmp_path, nodes):
    add_local_portal(dsn)  # also creates the ledger table
    clock.set_clock(clock.FrozenClock(TUE_10_ET))
    a = queue.enqueue("obtain_ein", "ORD-A", _ein("123-45-6789"))
    b = queue.enqueue("obtain_ein", "ORD-B", _ein("123-45-6789"))
    other = queue.enqueue("obtain_ein", "ORD-C", _ein("987-65-4321"))
    env = {"PORTALQ_FROZEN_NOW": TUE_10_ET.isoformat(),
           "PORTALQ_PLUGINS": "tests.plugins.ledger,tests.plugins.ein_ledger"}
    services = [Service(db, tmp_path, f"n{i}", **env).start() for i in range(nodes)]
    try:
        def settled():
            rows = {j: queue.get_job(j)["status"] for j in (a.id, b.id, other.id)}
            return sorted(rows.values()) == ["completed", "completed", "deferred"] and rows
        statuses = wait_until(settled, 30, "one of the two deferred")
    finally:
        for s in services:
            s.stop()
    assert statuses[other.id] == "completed"  # a different party is not limited
    deferred = a.id if statuses[a.id] == "deferred" else b.id
    row = queue.show_job(deferred)
    assert row["attempts"] == 0
    assert row["run_at"] >= datetime(2026, 12, 2, 5, 0, tzinfo=UTC)  # Wed 00:00 ET or later
    assert row["run_at"] <= WED_07_ET
    assert "rate limit" in row["events"][-1]["detail"]["event"] or any(
        "rate limit" in (e["detail"] or {}).get("event", "") for e in row["events"])
    with psycopg.connect(dsn) as c:
        ran = sorted(r[0] for r in c.execute("SELECT job_id FROM ledger").fetchall())
    assert deferred not in ran and len(ran) == 2

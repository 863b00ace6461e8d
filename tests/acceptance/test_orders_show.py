"""``portalq orders show ORD-1001 [--json]`` and ``portalq.order`` (issue 36): every job of
an order -- its status, its result, its timeline -- and nothing secret, even where a flow
leaked the SSN into its error and a person was told."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import psycopg
import pytest

import portalq
from portalq.jobs import clock, queue, worker_api
from portalq.jobs.worker_api import Capacity
from portalq.scheduler.cli.common import _json_default
from tests import payloads
from tests.conftest import run_cli

T0 = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # a Tuesday: every seeded portal open
SSN = payloads.OBTAIN_EIN["responsible_party"]["ssn"]


@pytest.fixture
def order(dsn: str) -> dict[str, int]:
    """ORD-1001: a name search that found its number, an EIN request refused (its error
    and its escalation naming the SSN, as a careless flow would), and another order."""
    clock.set_clock(clock.FrozenClock(T0))
    search = queue.enqueue("name_search", "ORD-1001", payloads.NAME_SEARCH)
    ein = queue.enqueue("obtain_ein", "ORD-1001", payloads.OBTAIN_EIN)
    queue.enqueue("name_search", "ORD-1002", payloads.NAME_SEARCH)

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            claimed = {j["id"]: j for j in await worker_api.claim(
                c, worker="w1", limit=10,
                capacities=[Capacity("bc_corporate_online", None), Capacity("irs_ein", None)])}
            await worker_api.complete_many(c, worker="w1",
                                           results=[(search.id, {"nr_number": "NR 1234567"})])
            await worker_api.finish_unsuccessful(
                c, job=claimed[ein.id], worker="w1", status="failed",
                error=f"the IRS refused {SSN}",
                escalation=("business", f"EIN refused for {SSN}: call the IRS"))
    asyncio.run(run())
    return {"search": search.id, "ein": ein.id}


def test_orders_show_json_every_job_status_result_timeline_no_secret(db, dsn, order):
    out = run_cli("orders", "show", "ORD-1001", "--json")
    assert out.returncode == 0, out.stderr
    view = json.loads(out.stdout)
    assert view["order_id"] == "ORD-1001"
    search, ein = view["jobs"]
    assert (search["id"], search["status"], search["result"]) == (
        order["search"], "completed", {"nr_number": "NR 1234567"})
    assert [e["to_status"] for e in search["events"]] == ["pending", "running", "completed"]
    assert (ein["id"], ein["status"], ein["result"]) == (order["ein"], "failed", None)
    assert [e["to_status"] for e in ein["events"]] == ["pending", "running", "failed"]
    assert ein["last_error"] == "the IRS refused ***"
    assert [x["kind"] for x in ein["escalations"]] == ["business"]
    assert "6789" not in out.stdout and "payload" not in search and "payload" not in ein
    # the Python side gives the same view
    assert json.loads(json.dumps(portalq.order("ORD-1001"), default=_json_default)) == view
    assert portalq.result(order["ein"])["status"] == "failed"


def test_orders_show_text(db, dsn, order):
    out = run_cli("orders", "show", "ORD-1001")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("order ORD-1001: 2 job(s)")
    assert f"job {order['search']} name_search on bc_corporate_online: completed" in text
    assert '"nr_number": "NR 1234567"' in text
    assert f"job {order['ein']} obtain_ein on irs_ein: failed" in text
    assert "#1 running -> failed  error: the IRS refused ***" in text
    assert "a person was told (business): EIN refused for ***: call the IRS" in text
    assert "6789" not in text


def test_an_unknown_or_bad_order_is_one_line_and_non_zero(db):
    for order_id, message in (("ORD-NONE", "no jobs for order 'ORD-NONE'"),
                              ("", "order id must not be empty")):
        out = run_cli("orders", "show", order_id)
        assert out.returncode != 0 and out.stdout == ""
        assert out.stderr == f"portalq: error: {message}\n", out.stderr

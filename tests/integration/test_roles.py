"""Nodes with a role: a node limited to chosen portals and job types claims nothing else;
unknown names in its role stop it at start with one line and exit 2."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
import pytest

from portalq.jobs import clock, queue, worker_api
from portalq.jobs.worker_api import Capacity
from portalq.scheduler.roles import Role
from tests import payloads
from tests.conftest import run_cli
from tests.service_helpers import Service, add_local_portal, wait_until

T0 = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # a Tuesday: every seeded portal open


def _claim(dsn: str, capacities: list[Capacity], limit: int = 50) -> list[dict]:
    async def go():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await worker_api.claim(c, worker="w", limit=limit, capacities=capacities)
    return asyncio.run(go())


def test_claim_with_a_job_type_filter_takes_only_those_types(dsn):
    clock.set_clock(clock.FrozenClock(T0))
    names = [queue.enqueue("name_search", f"N{i}", payloads.NAME_SEARCH).id for i in range(3)]
    filings = [queue.enqueue("file_entity", f"F{i}", payloads.FILE_ENTITY_BC).id
               for i in range(3)]
    role = Role(job_types=["file_entity"])
    caps = role.restrict([Capacity("bc_corporate_online", None)])
    assert sorted(j["id"] for j in _claim(dsn, caps)) == filings
    assert _claim(dsn, caps) == []   # the name searches are not for this node
    assert sorted(j["id"] for j in _claim(dsn, [Capacity("bc_corporate_online", None)])) == names


def test_role_restricts_portals_and_unrestricted_changes_nothing():
    caps = [Capacity("a", None), Capacity("b", 2), Capacity("c", None)]
    assert Role().restrict(caps) is caps
    assert [c.portal for c in Role(portals=["c", "a"]).restrict(caps)] == ["a", "c"]
    both = Role(portals=["b"], job_types=["y", "x"]).restrict(caps)
    assert both == [Capacity("b", 2, None, ("x", "y"))]


def test_two_nodes_with_portal_roles_split_the_work(db, dsn, tmp_path):
    for code in ("alpha", "beta"):
        add_local_portal(dsn, code=code)
    n = 60
    queue.enqueue_many([queue.NewJob("ledger_job", f"{p}{i}", {"portal": p})
                        for p in ("alpha", "beta") for i in range(n)])
    nodes = [Service(db, tmp_path, "a-node", PORTALQ_PORTALS="alpha").start(),
             Service(db, tmp_path, "b-node", PORTALQ_PORTALS="beta",
                     PORTALQ_JOB_TYPES="ledger_job").start()]
    try:
        wait_until(lambda: len(queue.list_jobs(status="completed", limit=1000)) == 2 * n, 60,
                   "every job done", interval=0.1)
    finally:
        for s in nodes:
            s.stop()
    with psycopg.connect(dsn) as c:
        pairs = dict(c.execute(
            "SELECT q.portal, array_agg(DISTINCT l.node) FROM ledger l "
            "JOIN portalq.job_queue q ON q.id = l.job_id GROUP BY 1").fetchall())
        runs = c.execute("SELECT count(*), count(DISTINCT job_id) FROM ledger").fetchone()
    assert pairs == {"alpha": ["a-node"], "beta": ["b-node"]}
    assert runs == (2 * n, 2 * n)


def test_a_node_for_other_job_types_leaves_the_jobs_alone(db, dsn, tmp_path):
    add_local_portal(dsn)
    job = queue.enqueue("ledger_job", "O1", {})
    svc = Service(db, tmp_path, "deliveries", PORTALQ_JOB_TYPES="deliver",
                  PORTALQ_POLL_SECONDS="0.1").start()
    try:
        # the node is up and claiming (its tick ran and it polls every 0.1 s)...
        wait_until(lambda: "portalq running" in svc.log(), 30, "the node to run")
        with psycopg.connect(dsn, autocommit=True) as c:
            deliver = queue.enqueue("deliver", "D1", payloads.DELIVER, conn=c)
            c.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) SELECT "
                      "'email', d, '00:00', '00:00' FROM generate_series(0, 6) d "
                      "ON CONFLICT DO NOTHING")
        # ...it takes the delivery (its type), never the ledger job
        wait_until(lambda: queue.get_job(deliver.id)["attempts"] >= 1, 30, "the delivery claimed")
    finally:
        svc.stop()
    assert queue.get_job(job.id)["status"] == "pending"
    assert queue.get_job(job.id)["attempts"] == 0


@pytest.mark.parametrize("flag, value, message", [
    ("--portals", "local,atlantis", "unknown portal 'atlantis'"),
    ("--job-types", "ledger_job,teleport", "unknown job type 'teleport'"),
    ("--portals", " , ", "--portals needs at least one name"),
])
def test_unknown_names_in_a_role_exit_2_with_one_line(db, dsn, tmp_path, flag, value, message):
    add_local_portal(dsn)
    result = run_cli("run", flag, value, env={"PORTALQ_PLUGINS": "tests.plugins.ledger",
                                              "PORTALQ_HOME": str(tmp_path)}, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("portalq: error: ") and message in lines[0]
    assert "portalq ready" not in result.stdout

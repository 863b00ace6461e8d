"""Claims keep their index at depth (issue 19): the claim, the tick's bulk deferral, the
rescue, the heartbeat and the prune are planned on indexes with 300,000 jobs waiting that
are not due and 100,000 finished ones — a plan that turns into a sequential scan of
job_queue fails here. The claim and the rescue are checked with their generic plans too
(psycopg prepares a statement after five runs, and the server may then switch to one)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from portalq.jobs import clock, worker_api
from portalq.jobs.db import sql

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)


@pytest.fixture
def deep(conn):
    conn.execute("INSERT INTO portalq.portals (code, name, timezone) VALUES ('p2', 'p2', 'UTC')")
    conn.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, priority, run_at,
                               created_at, updated_at)
        SELECT 'obtain_ein', 'O' || g, CASE WHEN g %% 3 = 0 THEN 'p2' ELSE 'irs_ein' END, '{}',
               CASE WHEN g %% 2 = 0 THEN 'deferred' ELSE 'pending' END, (g %% 3) - 1,
               %(now)s + (g %% 10000 || ' minutes')::interval, %(now)s, %(now)s
        FROM generate_series(1, 300000) g""", {"now": NOW})
    conn.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at, attempts,
                               created_at, updated_at, finished_at)
        SELECT 'obtain_ein', 'F' || g, 'irs_ein', '{}', 'completed', %(now)s, 1, %(now)s,
               %(now)s, %(now)s - (g || ' seconds')::interval
        FROM generate_series(1, 100000) g""", {"now": NOW})
    conn.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at, attempts,
                               lock_owner, heartbeat_at, created_at, updated_at)
        SELECT 'obtain_ein', 'R' || g, 'irs_ein', '{}', 'running', %(now)s, 1, 'w',
               %(now)s, %(now)s, %(now)s FROM generate_series(1, 20) g""", {"now": NOW})
    conn.execute("ANALYZE portalq.job_queue")
    return conn


def seq_scans(plan: dict) -> list[str]:
    found = []
    if plan.get("Node Type") == "Seq Scan" and plan.get("Relation Name") == "job_queue":
        found.append(plan.get("Filter", ""))
    for child in plan.get("Plans", []):
        found += seq_scans(child)
    return found


def explain(conn, name: str, params: dict, generic: bool = False, prepared_runs: int = 0,
            ) -> dict:
    conn.execute("SET plan_cache_mode = " + ("force_generic_plan" if generic else "auto"))
    with conn.cursor() as cur:
        if generic or prepared_runs:   # a prepared statement's plan: EXPLAIN EXECUTE
            cur.execute("DEALLOCATE ALL")
            text = sql.statement(name, params)
            names = list(dict.fromkeys(
                p.split(")s")[0] for p in text.split("%(")[1:]))
            for i, n in enumerate(names, 1):
                text = text.replace(f"%({n})s", f"${i}")
            cur.execute(f"PREPARE q AS {text}")
            args = ", ".join(_literal(params[n]) for n in names)
            for _ in range(prepared_runs):   # the server picks custom or generic after 5
                cur.execute(f"EXECUTE q({args})")
            cur.execute(f"EXPLAIN (FORMAT JSON) EXECUTE q({args})")
        else:
            cur.execute("EXPLAIN (FORMAT JSON) " + sql.statement(name, params),
                        {k: Jsonb(v) if isinstance(v, dict) else v for k, v in params.items()})
        return cur.fetchone()[0][0]["Plan"]


def _literal(value) -> str:
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'::timestamptz"
    if isinstance(value, timedelta):
        return f"'{value.total_seconds()} seconds'::interval"
    if isinstance(value, list):
        inner = ",".join("NULL" if v is None else str(v).replace(",", "") for v in value)
        return f"'{{{inner}}}'"
    if value is None:
        return "NULL"
    if isinstance(value, dict):
        return f"'{json.dumps(value)}'::jsonb"
    return str(value) if isinstance(value, int) else f"'{value}'"


CASES = {
    "claim": {"portals": ["irs_ein", "p2"], "limits": [None, 2], "limit": 50, "portal_count": 2,
              "worker": "w",
              "job_types": None, "key_ids": ["k1"],
              "now": NOW},
    "defer_candidates": {"portal": "irs_ein", "next_open": NOW + timedelta(days=1),
                         "now": NOW, "skip": [], "limit": 10000},
    "defer_ids": {"ids": list(range(1, 10001)), "next_open": NOW + timedelta(days=1),
                  "now": NOW, "detail": {"event": "portal closed"}},
    "stale_running": {"stale_before": NOW - timedelta(seconds=60), "limit": 500},
    "heartbeat": {"ids": [1, 2, 3], "worker": "w", "now": NOW},
    "prune_finished": {"before": NOW - timedelta(days=30),
                       "failed_before": NOW - timedelta(days=90), "limit": 10000},
}


def test_the_queue_statements_keep_their_indexes_at_depth(deep):
    """One database for every check (filling it is the cost)."""
    bad = {}
    for name, params in CASES.items():
        if scans := seq_scans(explain(deep, name, params)):
            bad[name] = scans
    for name in ("stale_running", "heartbeat", "claim"):
        if scans := seq_scans(explain(deep, name, CASES[name], generic=True)):
            bad[f"{name} (generic)"] = scans
    # psycopg prepares the claim after five runs; the server then plans it generically if
    # that looks no dearer (with its limit a parameter, the generic plan joined the update
    # by a sequential scan)
    if scans := seq_scans(explain(deep, "claim", CASES["claim"], prepared_runs=8)):
        bad["claim (prepared, after 8 runs)"] = scans
    assert bad == {}


def test_the_claim_is_planned_once_and_its_cached_plan_keeps_its_index(deep):
    """A claim planned anew on every run cost the server 0.57 ms a claim, more than running
    it (issue 19): its generic plan read job_queue sequentially, so the server never chose
    it. Run as the worker runs it (prepared by psycopg after five runs), the server must
    switch to its generic plan, and that plan must stay on the indexes at depth."""
    clock.set_clock(clock.FrozenClock(NOW))
    caps = [worker_api.Capacity("irs_ein", None), worker_api.Capacity("p2", 2)]

    async def go() -> dict:
        async with await psycopg.AsyncConnection.connect(
                deep.info.dsn, autocommit=True, prepare_threshold=5) as c:
            for _ in range(12):
                await worker_api.claim(c, worker="w", capacities=caps, limit=50)
            cur = await c.execute(
                "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'WITH caps AS MATERIALIZED%'")
            rows = await cur.fetchall()
            assert len(rows) == 1, rows
            name, generic, custom = rows[0]
            assert generic > 0, f"the claim was planned anew on each of its {custom} runs"
            params = {**CASES["claim"], "now": NOW}
            text = sql.statement("claim", params)
            names = list(dict.fromkeys(p.split(")s")[0] for p in text.split("%(")[1:]))
            args = ", ".join(_literal(params[n]) for n in names)
            cur = await c.execute(f"EXPLAIN (FORMAT JSON) EXECUTE {name}({args})")
            plan = (await cur.fetchone())[0][0]["Plan"]
            return plan

    assert seq_scans(asyncio.run(go())) == []

"""The migrations reproduce the models; they are idempotent; offline SQL is available;
the claim query uses its index."""

from __future__ import annotations

import json

import psycopg
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

from jobs import migrate
from jobs.models import metadata
from jobs.sql import query


def test_migrated_schema_matches_models(db):
    engine = create_engine(db)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()
    assert diff == []


def test_upgrade_is_idempotent_and_at_head(db):
    migrate.upgrade(db)
    migrate.upgrade(db)
    assert migrate.current(db) == "0003"


def test_head_revision_without_alembic_matches_alembic(db):
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
    assert migrate.head_revision() == head
    migrate.upgrade_if_needed(db)  # at head: a no-op
    assert migrate.current(db) == head


def test_offline_sql_for_dbas():
    text = migrate.offline_sql()
    assert "CREATE TABLE job_queue" in text
    assert "CREATE INDEX job_queue_claim" in text
    assert "INSERT INTO portals" in text


def test_claim_uses_its_index_with_100k_finished_jobs(dsn):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("""
            INSERT INTO job_queue (job_type, order_id, portal, payload, status, run_at,
                                   created_at, updated_at, finished_at, attempts)
            SELECT 'deliver', 'O' || g, 'email', '{}', 'completed', now(), now(), now(), now(), 1
            FROM generate_series(1, 100000) g""")
        c.execute("""
            INSERT INTO job_queue (job_type, order_id, portal, payload, status, run_at,
                                   created_at, updated_at)
            SELECT 'deliver', 'P' || g, 'email', '{}', 'pending', now(), now(), now()
            FROM generate_series(1, 50) g""")
        c.execute("ANALYZE job_queue")
        with c.transaction():
            sql = "EXPLAIN (FORMAT JSON) " + query("claim")
            plan = c.execute(sql, {"portals": ["email"], "limits": [None], "limit": 10,
                                   "worker": "w", "now": "2100-01-01T00:00:00Z"}).fetchone()[0]
            raise_rollback = psycopg.Rollback()
            text = json.dumps(plan)
            assert "job_queue_claim" in text, text
            assert '"Seq Scan"' not in text or '"Relation Name": "job_queue"' not in _seq(plan)
            raise raise_rollback


def _seq(plan) -> str:
    """JSON of the sequential scans in a plan (none may read job_queue)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("Node Type") == "Seq Scan":
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(plan)
    return json.dumps(found)

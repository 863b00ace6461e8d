"""The migrations reproduce the models; they are idempotent; offline SQL is available;
the claim query uses its index."""

from __future__ import annotations

import json

import psycopg
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

from portalq.jobs.db import migrate
from portalq.jobs.db.models import metadata
from portalq.jobs.db.sql import statement


def test_migrated_schema_matches_models(db):
    engine = create_engine(db)
    with engine.connect() as conn:
        # portalq's schema only (alembic's own table aside): the app's schemas are not ours
        ctx = MigrationContext.configure(conn, opts={
            "include_schemas": True, "version_table_schema": "portalq",
            "include_name": lambda name, kind, parent: (
                name == "portalq" if kind == "schema" else name != "alembic_version")})
        diff = compare_metadata(ctx, metadata)
    engine.dispose()
    assert diff == []


def test_upgrade_is_idempotent_and_at_head(db):
    migrate.upgrade(db)
    migrate.upgrade(db)
    assert migrate.current(db) == migrate.head_revision()


def test_0004_moves_enqueued_events_into_the_job_row_and_back(db, dsn):
    """0004 deletes the old ``enqueued`` event rows (the history derives them from the job
    row); its downgrade writes them back."""
    from portalq.jobs import queue

    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP SCHEMA portalq CASCADE")
    migrate.upgrade(db, "0003")
    with psycopg.connect(dsn, autocommit=True) as c:
        job_id = c.execute("""
            INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, run_at, created_at,
                                   updated_at)
            VALUES ('deliver', 'O-1', 'email', '{}', now(), '2026-11-02T10:00Z', now())
            RETURNING id""").fetchone()[0]
        c.execute("""INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, detail)
                     VALUES (%(id)s, '2026-11-02T10:00Z', 0, NULL, 'pending',
                             '{"event": "enqueued"}'),
                            (%(id)s, '2026-11-02T11:00Z', 1, 'pending', 'running', NULL)""",
                  {"id": job_id})
        migrate.upgrade(db)
        assert c.execute("SELECT count(*) FROM portalq.job_events").fetchone()[0] == 1
        history = queue.show_job(job_id, c)["events"]
        assert [(e["from_status"], e["to_status"]) for e in history] == [
            (None, "pending"), ("pending", "running")]
        migrate.upgrade(db, "0004")  # no-op; then down again
        from alembic import command

        command.downgrade(migrate.alembic_config(db), "0003")
        assert c.execute("SELECT from_status, to_status FROM portalq.job_events ORDER BY at, id"
                         ).fetchall() == [(None, "pending"), ("pending", "running")]


def test_head_revision_without_alembic_matches_alembic(db):
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()
    assert migrate.head_revision() == head
    migrate.upgrade_if_needed(db)  # at head: a no-op
    assert migrate.current(db) == head


def test_offline_sql_for_dbas():
    text = migrate.offline_sql()
    assert "CREATE TABLE job_queue" in text  # the migrations name objects unqualified
    assert "CREATE SCHEMA IF NOT EXISTS portalq" in text and "SET LOCAL search_path TO portalq" in text
    assert "CREATE INDEX job_queue_claim" in text
    assert "INSERT INTO portals" in text


def test_claim_uses_its_index_with_100k_finished_jobs(dsn):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("""
            INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                   created_at, updated_at, finished_at, attempts)
            SELECT 'deliver', 'O' || g, 'email', '{}', 'completed', now(), now(), now(), now(), 1
            FROM generate_series(1, 100000) g""")
        c.execute("""
            INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                   created_at, updated_at)
            SELECT 'deliver', 'P' || g, 'email', '{}', 'pending', now(), now(), now()
            FROM generate_series(1, 50) g""")
        c.execute("ANALYZE portalq.job_queue")
        # job_types: any (None), or a node's role (migration-free filter in the claim)
        for job_types in (None, ["deliver", "name_search"]):
            with c.transaction():
                params = {"portals": ["email"], "limits": [None], "limit": 10,
                          "portal_count": 1, "worker": "w", "now": "2100-01-01T00:00:00Z",
                          "job_types": job_types, "key_ids": ["k1"]}
                sql = "EXPLAIN (FORMAT JSON) " + statement("claim", params)
                plan = c.execute(sql, params).fetchone()[0]
                raise_rollback = psycopg.Rollback()
                text = json.dumps(plan)
                assert "job_queue_claim" in text, text
                assert '"Seq Scan"' not in text or '"Relation Name": "job_queue"' not in _seq(
                    plan)
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


def test_0014_keeps_a_submission_in_doubt_in_doubt_and_back(db, dsn):
    """Checkpoints written before the submission protocol: after 0014 the rescuer reads only
    the protocol's record, so every old "submitting" must become a record in doubt (and a
    downgrade must give the old code its "stage" back)."""
    from alembic import command

    from portalq.jobs import submission
    from portalq.jobs.checkpoints import past_point_of_no_return

    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP SCHEMA portalq CASCADE")
    migrate.upgrade(db, "0013")
    old = {
        "de_doubt": ("file_entity", {"jurisdiction": "DE"},
                     {"stage": "submitting", "client_ref": "PQ-1"}),
        "de_filed": ("file_entity", {"jurisdiction": "DE"},
                     {"stage": "filed", "client_ref": "PQ-2", "file_number": "1234567"}),
        "bc_inc": ("file_entity", {"jurisdiction": "BC"},
                   {"stage": "submitting", "submission": "incorporation",
                    "incorporation_reference": "PQ3-INC-aa", "nr_number": "NR 1234567",
                    "nr_state": "APPROVED", "name_request_reference": "PQ3-NAM-bb"}),
        "irs_doubt": ("obtain_ein", {}, {"stage": "submitting", "client_ref": "PQ-4-1"}),
        "irs_refused": ("obtain_ein", {}, {"stage": "not_accepted", "last_error": "109"}),
        "crtc": ("process_crtc", {}, {"stage": "submitted", "confirmation": "CRTC-2026-000001",
                                      "crtc_registration_reference": "PQ5-CRT-cc"}),
        "plugin": ("ledger_job", {}, {"stage": "submitting"}),
    }
    ids = {}
    with psycopg.connect(dsn, autocommit=True) as c:
        for key, (job_type, payload, cp) in old.items():
            ids[key] = c.execute(
                "INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, checkpoint, run_at,"
                " created_at, updated_at) VALUES (%s, 'O', 'email', %s, %s, now(), now(), now())"
                " RETURNING id",
                (job_type, json.dumps(payload), json.dumps(cp))).fetchone()[0]
        migrate.upgrade(db)
        cps = dict(c.execute("SELECT id, checkpoint FROM portalq.job_queue").fetchall())
        url = c.execute("SELECT url FROM portalq.portals WHERE code = 'irs_ein'").fetchone()[0]
    assert url.startswith("https://") and "irs.gov" in url
    recs = {k: submission.records(cps[i]) for k, i in ids.items()}
    doubt = {k for k, i in ids.items() if past_point_of_no_return(cps[i])}
    assert doubt == {"de_doubt", "bc_inc", "irs_doubt", "plugin"}
    assert recs["de_doubt"]["formation"].reference == "PQ-1"
    assert recs["de_filed"]["formation"].confirmation == {"file_number": "1234567"}
    assert recs["bc_inc"]["incorporation"].reference == "PQ3-INC-aa"
    assert recs["bc_inc"]["name_request"].state == "confirmed"
    assert recs["irs_refused"]["ein_application"].state == "refused"
    assert recs["crtc"]["crtc_registration"].confirmation == {"confirmation": "CRTC-2026-000001"}

    command.downgrade(migrate.alembic_config(db), "0013")
    with psycopg.connect(dsn, autocommit=True) as c:
        cps = dict(c.execute("SELECT id, checkpoint FROM portalq.job_queue").fetchall())
    assert {k for k, i in ids.items() if cps[i].get("stage") == "submitting"} == doubt
    assert not any("submissions" in cp for cp in cps.values())


def test_0028_masks_the_search_texts_in_place_and_its_downgrade_restores_them(db, dsn):
    """Issue 48 #13: job_search's texts, written unmasked before 0028, are masked by it
    (the console search then cannot match digits a page hides); its downgrade writes the
    stored texts back, and the triggers index new jobs unmasked again."""
    from alembic import command

    from portalq.jobs import queue, search_index
    from tests import payloads

    def texts(c: psycopg.Connection) -> list[str]:
        return [r[0] for r in c.execute(
            "SELECT legal_name FROM portalq.job_search ORDER BY job_id").fetchall()]

    with psycopg.connect(dsn, autocommit=True) as c:
        command.downgrade(migrate.alembic_config(db), "0027")
        queue.enqueue("file_entity", "O-1", {**payloads.FILE_ENTITY_DE,
                                             "legal_name": "Acme 987-65-4321 LLC"}, conn=c)
        assert texts(c) == ["Acme 987-65-4321 LLC"]       # as 0026 indexed it
        migrate.upgrade(db)
        assert texts(c) == ["Acme *** LLC"]
        queue.enqueue("file_entity", "O-2", {**payloads.FILE_ENTITY_DE,
                                             "legal_name": "Birch 123 45 6789 Inc."}, conn=c)
        search_index.catch_up(c, settle_seconds=0)   # at head: the indexer writes it (0033)
        assert texts(c) == ["Acme *** LLC", "Birch *** Inc."]
        command.downgrade(migrate.alembic_config(db), "0027")
        assert texts(c) == ["Acme 987-65-4321 LLC", "Birch 123 45 6789 Inc."]
        migrate.upgrade(db)
        assert texts(c) == ["Acme *** LLC", "Birch *** Inc."]

"""job_search, the console search's table beside the queue (migration 0026): the indexer
(migration 0033) fills it for every write path (single enqueue, a batch's INSERT and COPY, a
raw INSERT), a payload patch rewrites it, a status change never touches it, the job's
deletion takes its row, and it never holds a secret field's value."""

from __future__ import annotations

import importlib.util
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from portalq.jobs import clock, queue, search_index
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin.reads import SEARCH_FIELDS, JobFilter
from portalq.jobs.db import migrate, sql
from portalq.jobs.enqueue_paths import COPY_MIN
from portalq.jobs.queue import NewJob, enqueue_many
from tests import payloads
from tests.conftest import run_cli

_SPEC = importlib.util.spec_from_file_location("m0026", Path(__file__).parents[2]
                                               / "migrations/versions/0026_console_search.py")
assert _SPEC and _SPEC.loader
_M0026 = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_M0026)
NEEDS_TRGM = _M0026.NEEDS_TRGM

COLUMNS = [f.replace(".", "_") for f in SEARCH_FIELDS]


def _rows(c) -> dict[int, dict[str, str]]:
    out = {}
    for r in c.execute(f"SELECT job_id, {', '.join(COLUMNS)} FROM portalq.job_search"):
        out[r[0]] = {k: v for k, v in zip(COLUMNS, r[1:], strict=True) if v is not None}
    return out


def _deliver(i: int) -> NewJob:   # no searchable field: no row
    return NewJob("deliver", f"D-{i}", payloads.DELIVER)


def test_every_enqueue_path_fills_it_and_no_secret_reaches_it(conn):
    single = queue.enqueue("obtain_ein", "ORD-1", payloads.OBTAIN_EIN, conn=conn).id
    keyed = enqueue_many([NewJob("name_search", "ORD-2", payloads.NAME_SEARCH,
                                 idempotency_key="k-2"), _deliver(0)], conn=conn)
    copied = enqueue_many([NewJob("process_crtc", f"ORD-C{i}", {
        **payloads.PROCESS_CRTC, "company_name": f"Copy {i} Telecom"}) for i in range(COPY_MIN)]
        + [_deliver(i) for i in range(COPY_MIN)], conn=conn)
    raw = conn.execute("INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, "
                       "status, run_at, created_at, updated_at) VALUES ('file_entity', 'ORD-R', "
                       "'delaware_icis', %s::jsonb, 'pending', now(), now(), now()) "
                       "RETURNING id", ('{"legal_name": "Raw Row Inc."}',)).fetchone()[0]
    search_index.catch_up(conn, settle_seconds=0)   # one connection: no id in flight
    rows = _rows(conn)
    assert rows[single] == {"legal_name": "Widgets LLC"}
    assert rows[keyed[0].id] == {"names": '["Maple Leaf Widgets Ltd."]',
                                 "applicant_name": "Ada Lovelace"}
    assert rows[copied[5].id] == {"company_name": "Copy 5 Telecom"}
    assert rows[raw] == {"legal_name": "Raw Row Inc."}
    # jobs without a searchable field have no row
    assert keyed[1].id not in rows and copied[COPY_MIN].id not in rows
    assert len(rows) == 3 + COPY_MIN
    # the SSN of the obtain_ein job, in any form, is nowhere in the table
    text = repr(conn.execute("SELECT * FROM portalq.job_search").fetchall())
    for form in ("123-45-6789", "123456789", "6789"):
        assert form not in text
    assert "ssn" not in repr(conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'portalq.job_search'::regclass"
        ).fetchall())


def test_a_payload_patch_rewrites_it_a_status_change_does_not_touch_it(conn):
    job = queue.enqueue("file_entity", "ORD-1", payloads.FILE_ENTITY_DE, conn=conn).id
    search_index.catch_up(conn, settle_seconds=0)   # one connection: no id in flight
    where = "SELECT ctid FROM portalq.job_search WHERE job_id = %s"
    before = conn.execute(where, (job,)).fetchone()
    # claim, heartbeat, failure: updates that leave the payload alone
    conn.execute("UPDATE portalq.job_queue SET status = 'running', attempts = 1, "
                 "updated_at = now() WHERE id = %s", (job,))
    conn.execute("UPDATE portalq.job_queue SET status = 'failed', finished_at = now(), "
                 "last_error = 'no' WHERE id = %s", (job,))
    assert conn.execute(where, (job,)).fetchone() == before
    # a payload written again with the same searchable text: not rewritten either
    conn.execute("UPDATE portalq.job_queue SET payload = payload || "
                 "'{\"contact_email\": \"bo@example.com\"}' WHERE id = %s", (job,))
    assert conn.execute(where, (job,)).fetchone() == before
    # a person's patch of the legal name: the search finds the new name, not the old
    queue.retry(job, payload_patch={"legal_name": "Renamed Holdings LLC"}, conn=conn)
    assert _rows(conn)[job] == {"legal_name": "Renamed Holdings LLC"}
    assert [r["id"] for r in console_repo.jobs_page(conn, JobFilter(
        field="legal_name", value="renamed hold"), before_id=job + 1, window=1).rows] == [job]
    assert console_repo.jobs_page(conn, JobFilter(
        field="legal_name", value="widgets llc"), before_id=job + 1, window=1).rows == []
    # a patch that removes every searchable field removes the row
    conn.execute("UPDATE portalq.job_queue SET payload = payload - 'legal_name' WHERE id = %s",
                 (job,))
    assert job not in _rows(conn)


def test_the_jobs_row_goes_with_the_job(conn):
    old = clock.now() - timedelta(days=400)
    jobs = [queue.enqueue("file_entity", f"ORD-{i}", payloads.FILE_ENTITY_DE, conn=conn).id
            for i in range(3)]
    search_index.catch_up(conn, settle_seconds=0)   # one connection: no id in flight
    conn.execute("UPDATE portalq.job_queue SET status = 'completed', finished_at = %s "
                 "WHERE id = ANY(%s)", (old, jobs[:2]))
    pruned = sql.fetch(conn, "prune_finished", {"before": clock.now(),
                                                "failed_before": clock.now(), "limit": 100})
    assert pruned[0]["pruned"] == 2
    assert list(_rows(conn)) == [jobs[2]]


@pytest.mark.parametrize("isolation", ["read committed", "repeatable read"])
def test_migrate_copies_while_the_queue_is_written_and_catches_up_what_was_written(
        pg_server, isolation):
    """0026 copies and indexes the existing jobs without holding off the business's writes;
    what a writer did meanwhile (a job enqueued, a name patched, a job deleted) is caught up
    once the triggers are in place, in the same migration. Here the writer's transaction
    is still open when the copy reads the queue, and commits while the migration waits to
    add its triggers (seen in pg_stat_activity, not timed). The catch-up must see what was
    committed after the copy: so also with a database whose default isolation is
    repeatable read (one snapshot per transaction), which ``portalq migrate`` overrides."""
    import threading

    name = f"m26_{uuid.uuid4().hex[:12]}"
    with pg_server.admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
        c.execute(f"ALTER DATABASE \"{name}\" SET default_transaction_isolation = '{isolation}'")
    url, dsn = pg_server.url(name), pg_server.dsn(name)
    insert = """INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status,
                                               run_at, created_at, updated_at)
                VALUES ('file_entity', %s, 'delaware_icis', %s::jsonb, 'pending', now(),
                        now(), now()) RETURNING id"""
    try:
        migrate.upgrade(url, "0025")
        with psycopg.connect(dsn, autocommit=True) as c:
            ids = [c.execute(insert, (f"O-{n}", f'{{"legal_name": "Old {n} Ltd."}}'))
                   .fetchone()[0] for n in range(3)]
        failed: list[BaseException] = []

        def run() -> None:
            try:
                migrate.upgrade(url)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                failed.append(exc)

        with psycopg.connect(dsn) as writer:
            new = writer.execute(insert, ("O-new", '{"legal_name": "New Ltd."}')).fetchone()[0]
            writer.execute("""UPDATE portalq.job_queue SET payload = '{"legal_name": "Patched"}'
                              WHERE id = %s""", (ids[0],))
            writer.execute("DELETE FROM portalq.job_queue WHERE id = %s", (ids[1],))
            migration = threading.Thread(target=run)
            migration.start()
            with psycopg.connect(dsn, autocommit=True) as watch:
                for _ in range(600):   # the copy is done once the triggers wait for us
                    if watch.execute("""SELECT 1 FROM pg_stat_activity WHERE wait_event_type
                                        = 'Lock' AND query LIKE '%%CREATE TRIGGER%%'""").fetchone():
                        break
                    assert migration.is_alive() and not failed, failed
                    watch.execute("SELECT pg_sleep(0.05)")
                else:
                    raise AssertionError("the migration never reached its triggers")
            writer.commit()
        migration.join(60)
        assert not failed, failed
        with psycopg.connect(dsn) as c:
            assert _rows(c) == {ids[0]: {"legal_name": "Patched"},
                                ids[2]: {"legal_name": "Old 2 Ltd."},
                                new: {"legal_name": "New Ltd."}}
            c.execute("DELETE FROM portalq.job_queue WHERE id = %s", (ids[2],))  # the key
            assert ids[2] not in _rows(c)
    finally:
        pg_server.drop(name)


@pytest.mark.parametrize("sqlstate", ["42501", "58P01"])
def test_migrate_says_in_one_line_what_to_ask_when_pg_trgm_cannot_be_created(
        pg_server, sqlstate):
    """The refusal provoked by an event trigger on CREATE EXTENSION (the server's own error
    path, with the SQLSTATE of a role without the privilege / of a server without contrib's
    files): a role without CREATE on the database cannot even make portalq's schema (that
    fails before 0026), and the embedded server ships pg_trgm."""
    name = f"trgm_{uuid.uuid4().hex[:12]}"
    with pg_server.admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    url, dsn = pg_server.url(name), pg_server.dsn(name)
    try:
        migrate.upgrade(url, "0025")
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"""
                CREATE FUNCTION public.no_extensions() RETURNS event_trigger LANGUAGE plpgsql
                AS $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '{sqlstate}'; END $$""")
            c.execute("CREATE EVENT TRIGGER no_extensions ON ddl_command_start "
                      "WHEN TAG IN ('CREATE EXTENSION') EXECUTE FUNCTION public.no_extensions()")
        out = run_cli("migrate", env={"PORTALQ_DATABASE_URL": url})
        assert out.returncode != 0
        assert out.stderr.strip().splitlines() == [f"portalq: error: {NEEDS_TRGM}"], out.stderr
        assert migrate.current(url) == "0025"      # nothing of 0026 is left
        with psycopg.connect(dsn, autocommit=True) as c:
            assert c.execute("SELECT to_regclass('portalq.job_search')").fetchone()[0] is None
            c.execute("DROP EVENT TRIGGER no_extensions")
        assert run_cli("migrate", env={"PORTALQ_DATABASE_URL": url}).returncode == 0
        assert migrate.current(url) == migrate.head_revision()
    finally:
        pg_server.drop(name)


def test_the_app_role_writes_it_through_the_indexer_and_the_triggers(pg_server, db):
    """portalq's processes run as a role without superuser rights (embedded server): its
    indexer, payload edits and deletions write job_search."""
    from portalq.jobs.db import embedded

    if getattr(pg_server, "embedded", None) is None:
        pytest.skip("the tests run against PORTALQ_TEST_DATABASE_URL, not the embedded server")
    name = db.rsplit("/", 1)[1].split("?")[0]
    with psycopg.connect(pg_server.embedded.dsn(name, role=embedded.APP_ROLE),
                         autocommit=True) as c:
        assert c.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                         ).fetchone() == (False,)
        job = queue.enqueue("file_entity", "ORD-1", payloads.FILE_ENTITY_DE, conn=c).id
        assert _rows(c) == {}
        assert search_index.step(c).indexed_to == job
        assert _rows(c) == {job: {"legal_name": "Widgets LLC"}}
        c.execute("UPDATE portalq.job_queue SET payload = payload || "
                  "'{\"legal_name\": \"Gadgets LLC\"}' WHERE id = %s", (job,))
        assert _rows(c) == {job: {"legal_name": "Gadgets LLC"}}
        c.execute("DELETE FROM portalq.job_queue WHERE id = %s", (job,))
        assert _rows(c) == {}

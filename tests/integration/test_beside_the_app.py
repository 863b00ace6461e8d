"""portalq in the business's own database: `portalq migrate` beside an application that has
its own ``job_queue`` (the legacy queue's shape), its own alembic ``alembic_version`` and
tables whose names portalq also uses; every object of portalq in its own schema, the app's
objects byte for byte as they were; an installation made before the schema moved into it."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from tests.conftest import run_cli

APP_SCHEMA = """
CREATE TABLE job_queue (           -- the app's migration 015_job_queue.sql
    id SERIAL PRIMARY KEY,
    job_type text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL DEFAULT 'pending',
    attempts int NOT NULL DEFAULT 0,
    last_error text,
    run_at timestamptz NOT NULL DEFAULT now(),
    portal_tz text,
    portal_hours text,
    order_id text,
    order_type text
);
INSERT INTO job_queue (job_type, payload, status, portal_tz, portal_hours, order_id, order_type)
VALUES ('file_entity', '{"state": "DE"}', 'pending', 'America/New_York', '08:00-22:30',
        'ORD-7', 'llc'),
       ('obtain_ein', '{}', 'deferred', 'America/New_York', '07:00-22:00', 'ORD-8', 'llc');
CREATE TABLE alembic_version (version_num varchar(32) NOT NULL PRIMARY KEY);
INSERT INTO alembic_version VALUES ('3f2a9c1b7d10');
CREATE TABLE orders (id text PRIMARY KEY, customer text NOT NULL);
INSERT INTO orders VALUES ('ORD-7', 'Ada'), ('ORD-8', 'Grace');
CREATE TABLE audit_log (id bigserial PRIMARY KEY, what text);   -- a name portalq uses too
INSERT INTO audit_log (what) VALUES ('app started');
CREATE TABLE portals (code text PRIMARY KEY);                    -- and another
CREATE FUNCTION app_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.customer := trim(NEW.customer); RETURN NEW; END $$;
CREATE TRIGGER orders_touch BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION app_touch();
CREATE VIEW open_jobs AS SELECT id, job_type FROM job_queue WHERE status <> 'done';
"""

# every object of a schema and its definition, and every table's rows: equal before and
# after means byte for byte (a change of a column, a default, an index, a row shows)
FINGERPRINT = """
SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' ||
       coalesce((SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod)
                 || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), ''), ',' ORDER BY a.attnum)
                 FROM pg_attribute a LEFT JOIN pg_attrdef d
                   ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                 WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') ||
       coalesce(' ' || pg_get_indexdef(c.oid), '') ||
       coalesce(' ' || pg_get_viewdef(c.oid), '')
FROM pg_class c WHERE c.relnamespace = %(s)s::regnamespace
UNION ALL
SELECT 'fn ' || p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid))
FROM pg_proc p WHERE p.pronamespace = %(s)s::regnamespace
UNION ALL
SELECT 'trg ' || t.tgname || ' ' || pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = %(s)s::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'con ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = %(s)s::regnamespace
ORDER BY 1
"""


def _fingerprint(conn: psycopg.Connection, schema: str = "public") -> list[str]:
    objects = [r[0] for r in conn.execute(FINGERPRINT, {"s": schema})]
    for (table,) in conn.execute("SELECT relname FROM pg_class WHERE relkind = 'r' AND "
                                 "relnamespace = %s::regnamespace ORDER BY 1", (schema,)):
        rows = conn.execute(f'SELECT md5(coalesce(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) '
                            f'FROM {schema}."{table}" t').fetchone()[0]
        objects.append(f"rows {table} {rows}")
    return objects


@pytest.fixture
def app_db(pg_server):
    """A database that holds only the business's application (no portalq yet)."""
    name = f"app_{uuid.uuid4().hex[:12]}"
    with pg_server.admin() as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.url(name), pg_server.dsn(name)
    pg_server.drop(name)


def test_migrate_beside_an_app_with_its_own_job_queue_and_alembic(app_db):
    url, dsn = app_db
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(APP_SCHEMA)
        before = _fingerprint(c)
    out = run_cli("migrate", env={"PORTALQ_DATABASE_URL": url})
    assert out.returncode == 0, out.stderr
    with psycopg.connect(dsn, autocommit=True) as c:
        assert _fingerprint(c) == before       # the app's objects and rows untouched
        assert c.execute("SELECT version_num FROM public.alembic_version").fetchall() == [
            ("3f2a9c1b7d10",)]
        ours = {r[0] for r in c.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'portalq'::regnamespace "
            "AND relkind = 'r'")}
        assert {"job_queue", "alembic_version", "audit_log", "portals", "escalations"} <= ours
        assert c.execute("SELECT count(*) FROM pg_proc WHERE proname LIKE 'portalq%%' AND "
                         "pronamespace <> 'portalq'::regnamespace").fetchone()[0] == 0
        # every function of portalq finds its tables whoever calls it
        assert c.execute("SELECT bool_and(proconfig @> ARRAY['search_path=pg_catalog, portalq']) "
                         "FROM pg_proc WHERE pronamespace = 'portalq'::regnamespace"
                         ).fetchone()[0]

    # the app enqueues in its own transaction, with its own search path (public): the job
    # goes into portalq's queue, the app's queue is not touched
    import portalq

    with psycopg.connect(dsn) as app:
        assert app.execute("SHOW search_path").fetchone()[0] == '"$user", public'
        app.execute("INSERT INTO orders VALUES ('ORD-9', ' Linus ')")
        portalq.enqueue("name_search", "ORD-9", {
            "names": ["Maple Leaf Widgets Ltd."],
            "applicant": {"name": "Ada Lovelace", "email": "ada@example.com",
                          "phone": "604-555-0100"}}, conn=app)
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM public.job_queue").fetchone()[0] == 2
        assert c.execute("SELECT job_type, order_id FROM portalq.job_queue").fetchall() == [
            ("name_search", "ORD-9")]
        assert c.execute("SELECT customer FROM orders WHERE id = 'ORD-9'").fetchone()[0] == "Linus"
    # and `portalq migrate` again changes nothing
    again = run_cli("migrate", env={"PORTALQ_DATABASE_URL": url})
    assert again.returncode == 0, again.stderr
    assert "schema at 0019" in again.stdout or again.stdout.strip().splitlines()[-1].startswith(
        "schema at ") or "holidays" in again.stdout


def test_an_installation_in_public_moves_into_the_schema_with_its_data(app_db):
    """Before the schema, portalq's objects were in public and its version in
    public.alembic_version: made here by migrating to 0018 and moving it all back."""
    url, dsn = app_db
    from portalq.jobs.db import migrate

    migrate.upgrade(url, "0018")
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("""
            DO $$ DECLARE r record; BEGIN
              FOR r IN SELECT relname FROM pg_class WHERE relkind = 'r'
                       AND relnamespace = 'portalq'::regnamespace LOOP
                EXECUTE format('ALTER TABLE portalq.%I SET SCHEMA public', r.relname);
              END LOOP;
              FOR r IN SELECT oid::regprocedure AS f FROM pg_proc
                       WHERE pronamespace = 'portalq'::regnamespace LOOP
                EXECUTE format('ALTER FUNCTION %s SET SCHEMA public', r.f);
              END LOOP;
            END $$""")
        c.execute("DROP SCHEMA portalq")
        c.execute("INSERT INTO public.job_queue (job_type, order_id, portal, payload, status, "
                  "run_at, created_at, updated_at) VALUES ('deliver', 'ORD-OLD', 'email', '{}', "
                  "'pending', now(), now(), now())")
        c.execute("CREATE TABLE public.orders (id text PRIMARY KEY)")   # the app's
    out = run_cli("migrate", env={"PORTALQ_DATABASE_URL": url})
    assert out.returncode == 0, out.stderr
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SELECT order_id FROM portalq.job_queue").fetchall() == [("ORD-OLD",)]
        assert c.execute("SELECT version_num FROM portalq.alembic_version").fetchone()[0] == (
            migrate.head_revision())
        left = [r[0] for r in c.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND relkind IN ('r', 'S') ORDER BY 1")]
        assert left == ["orders"]
        # the identity sequence came along: the next job takes the next id
        with c.transaction():
            nxt = c.execute("INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, "
                            "status, run_at, created_at, updated_at) VALUES ('deliver', 'N', "
                            "'email', '{}', 'pending', now(), now(), now()) RETURNING id"
                            ).fetchone()[0]
        assert nxt > 1


def test_migrate_sql_for_dbas_names_the_schema_and_the_move():
    out = run_cli("migrate", "--sql")
    assert out.returncode == 0, out.stderr
    assert "CREATE SCHEMA IF NOT EXISTS portalq" in out.stdout
    assert "ALTER TABLE public.%I SET SCHEMA portalq" in out.stdout
    assert "CREATE TABLE portalq.alembic_version" in out.stdout


def test_another_schema_by_setting(app_db, tmp_path):
    url, dsn = app_db
    env = {"PORTALQ_DATABASE_URL": url, "PORTALQ_SCHEMA": "formation_queue"}
    assert run_cli("migrate", env=env).returncode == 0
    payload = tmp_path / "p.json"
    payload.write_text('{"names": ["Maple Leaf Widgets Ltd."], "applicant": {"name": "Ada", '
                       '"email": "ada@example.com", "phone": "604-555-0100"}}')
    out = run_cli("enqueue", "name_search", "--order", "ORD-1", "--payload-file", str(payload),
                  env=env)
    assert out.returncode == 0, out.stderr
    listed = run_cli("jobs", "list", env=env)
    assert listed.returncode == 0 and "ORD-1" in listed.stdout, listed.stderr
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT order_id FROM formation_queue.job_queue").fetchall() == [
            ("ORD-1",)]
        assert c.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'portalq'"
                         ).fetchone()[0] == 0
    bad = run_cli("jobs", "list", env={**env, "PORTALQ_SCHEMA": "Robert'); DROP"})
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "PORTALQ_SCHEMA" in bad.stderr


def test_migrate_and_run_as_a_role_that_does_not_own_public_nor_create_in_it(app_db,
                                                                             pg_server):
    """PostgreSQL 15's default (and what a careful DBA does before it): the public schema
    belongs to the database owner, nobody else may create in it. portalq's role may create
    a schema in the database (its own), nothing more: migrate, enqueue and list work."""
    from sqlalchemy.engine import make_url

    _, dsn = app_db
    role, password = f"pq_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    database = make_url(app_db[0]).database
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(APP_SCHEMA)
        c.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")   # as PostgreSQL 15 has it
        c.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        c.execute(f'GRANT CONNECT, CREATE ON DATABASE "{database}" TO {role}')
        before = _fingerprint(c)
    url = pg_server.base.set(username=role, password=password, database=database) \
        .render_as_string(hide_password=False)
    try:
        with psycopg.connect(pg_server.base.set(
                drivername="postgresql", username=role, password=password,
                database=database).render_as_string(hide_password=False)) as c:
            assert c.execute("SELECT has_schema_privilege('public', 'CREATE'), "
                             "pg_get_userbyid(nspowner) = current_user FROM pg_namespace "
                             "WHERE nspname = 'public'").fetchone() == (False, False)
        env = {"PORTALQ_DATABASE_URL": url}
        out = run_cli("migrate", env=env)
        assert out.returncode == 0, out.stderr
        job = run_cli("enqueue", "name_search", "--order", "ORD-ROLE", "--payload", json.dumps({
            "names": ["Maple Leaf Widgets Ltd."],
            "applicant": {"name": "Ada Lovelace", "email": "ada@example.com",
                          "phone": "604-555-0100"}}), env=env)
        assert job.returncode == 0, job.stderr
        listed = run_cli("jobs", "list", "--order", "ORD-ROLE", env=env)
        assert listed.returncode == 0, listed.stderr
        assert job.stdout.strip() in listed.stdout and "name_search" in listed.stdout
        with psycopg.connect(dsn, autocommit=True) as c:
            assert _fingerprint(c) == before
            assert c.execute("SELECT pg_get_userbyid(nspowner) FROM pg_namespace "
                             "WHERE nspname = 'portalq'").fetchone() == (role,)
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("DROP SCHEMA IF EXISTS portalq CASCADE")
            c.execute(f"DROP OWNED BY {role}")
            c.execute(f"DROP ROLE {role}")

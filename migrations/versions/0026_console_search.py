"""The console's search at scale (issue 39): the job list's portal and job-type filters on
indexes, and a substring search of the searchable payload fields through trigram indexes
that live beside the queue, not on it.

- ``job_queue_portal_id`` and ``job_queue_type_id`` (btree, then ``id``): a portal or job-type
  filter reads its own jobs newest first, however rare they are in the table (a portal with
  few jobs made the list read the whole table: 685 ms at a million rows).
- ``job_search``: one row per job that has a searchable payload field, a column per field
  (:data:`portalq.jobs.admin.reads.SEARCH_FIELDS` names the same fields, ``.`` as ``_``; a
  test checks both), its text as ``payload #>> path`` gives it. Written once per job, not at
  each of its transitions: every status change of a ``job_queue`` row is a non-HOT update (its partial
  indexes are on ``status``) that inserts the row into each of its indexes again, and a GIN
  trigram index there cost the claimer a third of its throughput on such jobs.
- ``job_search_<field>``: a GIN trigram index (``pg_trgm``) per field's column, partial
  (the rows that have it). One row per job, keyed by ``job_id`` alone: a key with the field
  in it would let the planner read that key whole for a field's rows.
- Filled by triggers, so that no write path can forget it (COPY, INSERT, adopt, an order's
  steps, a payload patch): ``job_queue_search_insert``, once per INSERT/COPY statement over
  its new rows (a statement of jobs without such a field inserts nothing), and
  ``job_queue_search_update``, per row whose searchable text changed in an UPDATE that sets
  ``payload`` (a retry with a payload edit, an order step released with its payload); an
  UPDATE that does not name ``payload`` (claim, heartbeat, complete) never runs it. Rows go
  with their job (``ON DELETE CASCADE``: prune, retention).
- Secret fields are never here: they are sealed out of ``payload`` (migration 0012), none is
  a searchable field (a test checks every job type) and the search refuses them.

The existing jobs' rows are copied in and indexed while the business's writes to
``job_queue`` go on; only the triggers, the catch-up of what was written meanwhile, the key
to ``job_queue`` and its two btrees make writers wait (until the migration commits).

``pg_trgm`` ships with PostgreSQL (contrib) and is a trusted extension: the role that
migrates needs only ``CREATE`` on the database, as it does for portalq's schema. It is
created in portalq's schema unless the database already has it (then that one is used,
its schema named in the operator class). Without the extension's files (or where it is not
trusted, or refused by a hosted server) the migration stops with one line saying what to
ask the DBA (a role without ``CREATE`` on the database stops earlier, at portalq's schema).

Revision ID: 0026
Revises: 0025
"""
from __future__ import annotations

from alembic import context, op

from portalq.jobs.errors import PortalqError

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

#: searchable field -> its path in ``payload`` (the same names as reads.SEARCH_FIELDS)
FIELDS = {"legal_name": "{legal_name}", "company_name": "{company_name}",
          "names": "{names}", "applicant.name": "{applicant,name}"}

NEEDS_TRGM = ("portalq needs the pg_trgm extension for the console's search (migration "
              "0026): run `CREATE EXTENSION pg_trgm;` in this database as its owner or a "
              "superuser (Debian/Ubuntu: it ships with postgresql-contrib), then migrate again")


def _column(field: str) -> str:
    return field.replace(".", "_")


COLUMNS = ", ".join(_column(f) for f in FIELDS)


def _rows(source: str) -> str:
    """job_search's row of each job of ``source`` (a relation ``n`` with ``id`` and
    ``payload``) that has a searchable field."""
    texts = ", ".join(f"n.payload #>> '{path}'::text[] AS {_column(field)}"
                      for field, path in FIELDS.items())
    return (f"SELECT * FROM (SELECT n.id AS job_id, {texts} FROM {source}) f "
            f"WHERE num_nonnulls({COLUMNS}) > 0")


# the operator class is named with the schema the extension is in: the migration's search
# path is portalq's schema alone, and a database may have had pg_trgm elsewhere already
_INDEXES = """
DO $do$
DECLARE ext text := (SELECT extnamespace::regnamespace::text FROM pg_extension
                     WHERE extname = 'pg_trgm');
BEGIN
{statements}
END
$do$"""
_ONE = ("    EXECUTE format('CREATE INDEX IF NOT EXISTS job_search_{name} ON job_search "
        "USING gin ({name} %s.gin_trgm_ops) WHERE {name} IS NOT NULL', ext);")


def _create_extension() -> None:
    if context.is_offline_mode():
        op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        return
    from sqlalchemy.exc import DBAPIError

    bind = op.get_bind()
    try:
        with bind.begin_nested():
            bind.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except DBAPIError as exc:
        # insufficient privilege (42501) or no extension files (58P01, 0A000): say what to do
        if getattr(exc.orig, "sqlstate", None) in ("42501", "58P01", "0A000"):
            raise PortalqError(NEEDS_TRGM) from None
        raise


def _pin(name: str) -> None:
    """The trigger functions run with the caller's search path: pinned to portalq's schema
    (as migration 0019 pins the others)."""
    op.execute(f"""
        DO $pin$ BEGIN
            EXECUTE format('ALTER FUNCTION {name}() SET search_path = pg_catalog, %I',
                           current_schema());
        END $pin$""")


def _triggers() -> None:
    op.execute(f"""
        CREATE FUNCTION portalq_job_search_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO job_search (job_id, {COLUMNS})
            {_rows("inserted n")};
            RETURN NULL;
        END $$""")
    op.execute(f"""
        CREATE FUNCTION portalq_job_search_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM job_search WHERE job_id = NEW.id;
            INSERT INTO job_search (job_id, {COLUMNS})
            {_rows("(SELECT NEW.id, NEW.payload) n")};
            RETURN NULL;
        END $$""")
    for name in ("portalq_job_search_insert", "portalq_job_search_update"):
        _pin(name)
    op.execute("""
        CREATE TRIGGER job_queue_search_insert AFTER INSERT ON job_queue
        REFERENCING NEW TABLE AS inserted
        FOR EACH STATEMENT EXECUTE FUNCTION portalq_job_search_insert()""")
    # a column list (UPDATE OF payload) cannot have a transition table: a row trigger, which
    # the statements that leave ``payload`` out do not run, nor those that keep the texts
    changed = " OR ".join(f"OLD.payload #>> '{path}' IS DISTINCT FROM NEW.payload #>> '{path}'"
                          for path in FIELDS.values())
    op.execute(f"""
        CREATE TRIGGER job_queue_search_update AFTER UPDATE OF payload ON job_queue
        FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION portalq_job_search_update()""")


def upgrade() -> None:
    # First what only reads job_queue, so the business's writes go on meanwhile (at a
    # million jobs most of the migration's time: bench/migrate_stall.py) ...
    _fill()
    _create_extension()
    op.execute(_INDEXES.format(statements="\n".join(
        _ONE.format(name=_column(field)) for field in FIELDS)))
    # ... then what makes them wait until the migration commits, kept short
    _attach()


def _fill() -> None:
    """``job_search`` with a row for each job there now; no key to job_queue yet (a foreign
    key checked row by row was half the copy's time, and adding it locks job_queue)."""
    columns = ", ".join(f"{_column(f)} text" for f in FIELDS)
    op.execute(f"CREATE TABLE job_search (job_id bigint NOT NULL, {columns})")
    op.execute(f"INSERT INTO job_search (job_id, {COLUMNS}) {_rows('job_queue n')}")
    op.execute("ALTER TABLE job_search ADD CONSTRAINT job_search_pkey PRIMARY KEY (job_id)")


def _attach() -> None:
    """The triggers (their lock waits for the writers in flight and holds off later ones
    until the commit), then what writers did since the copy -- new jobs, jobs gone, texts
    patched -- caught up, the key to job_queue, and the console's two filter indexes
    (``IF NOT EXISTS``: a DBA with a large queue may build them ``CONCURRENTLY`` first)."""
    _triggers()
    # one pass over the queue and job_search: only the rows that differ are written (a job
    # gone or without a searched field any more, a new job, a patched text)
    columns = [_column(f) for f in FIELDS]
    changed = " OR ".join(f"s.{c} IS DISTINCT FROM f.{c}" for c in columns)
    op.execute(f"""
        WITH d AS MATERIALIZED (
            SELECT coalesce(f.job_id, s.job_id) AS job_id, f.job_id IS NOT NULL AS present,
                   {", ".join(f"f.{c}" for c in columns)}
            FROM ({_rows('job_queue n')}) f FULL JOIN job_search s ON s.job_id = f.job_id
            WHERE f.job_id IS NULL OR s.job_id IS NULL OR {changed}),
        gone AS (DELETE FROM job_search s USING d WHERE s.job_id = d.job_id AND NOT d.present)
        INSERT INTO job_search (job_id, {COLUMNS})
        SELECT job_id, {COLUMNS} FROM d WHERE d.present
        ON CONFLICT (job_id) DO UPDATE SET {", ".join(f"{c} = EXCLUDED.{c}" for c in columns)}""")
    # checked once over the whole table here (already under the triggers' lock)
    op.execute("""
        ALTER TABLE job_search ADD CONSTRAINT job_search_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES job_queue (id) ON DELETE CASCADE""")
    op.execute("CREATE INDEX IF NOT EXISTS job_queue_portal_id ON job_queue (portal, id)")
    op.execute("CREATE INDEX IF NOT EXISTS job_queue_type_id ON job_queue (job_type, id)")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS job_queue_search_update ON job_queue")
    op.execute("DROP TRIGGER IF EXISTS job_queue_search_insert ON job_queue")
    op.execute("DROP FUNCTION IF EXISTS portalq_job_search_update()")
    op.execute("DROP FUNCTION IF EXISTS portalq_job_search_insert()")
    op.execute("DROP TABLE IF EXISTS job_search")   # its indexes with it
    # pg_trgm stays: another application of the database may use it
    op.drop_index("job_queue_type_id", table_name="job_queue")
    op.drop_index("job_queue_portal_id", table_name="job_queue")

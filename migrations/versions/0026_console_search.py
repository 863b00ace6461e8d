"""The console's search at scale (issue 39): the job list's portal and job-type filters on
indexes, and a substring search of the searchable payload fields through trigram indexes.

- ``job_queue_portal_id`` and ``job_queue_type_id`` (btree, then ``id``): a portal or job-type
  filter reads its own jobs newest first, however rare they are in the table (a portal with
  few jobs made the list read the whole table: 685 ms at a million rows).
- ``job_queue_search_<field>``: a GIN trigram index (``pg_trgm``) on each searchable payload
  field (:data:`portalq.jobs.admin.reads.SEARCH_FIELDS` names the same fields; a test
  checks both). Partial (the field is there): a job of another type adds nothing to it.
  Secret fields are never here: they are sealed out of ``payload`` (migration 0012) and
  refused by the search.

``pg_trgm`` ships with PostgreSQL (contrib) and is a trusted extension: the role that
migrates needs only ``CREATE`` on the database, as it does for portalq's schema. It is
created in portalq's schema unless the database already has it (then that one is used,
its schema named in the operator class). Without the privilege or the extension's files the
migration stops with one line saying what to ask the DBA.

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

#: index name suffix -> the field's path in ``payload`` (the expression the search uses)
FIELDS = {"legal_name": "{legal_name}", "company_name": "{company_name}",
          "names": "{names}", "applicant_name": "{applicant,name}"}

NEEDS_TRGM = ("portalq needs the pg_trgm extension for the console's search (migration "
              "0026): run `CREATE EXTENSION pg_trgm;` in this database as its owner or a "
              "superuser (Debian/Ubuntu: it ships with postgresql-contrib), then migrate again")

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
_ONE = ("    EXECUTE format('CREATE INDEX IF NOT EXISTS job_queue_search_{name} ON job_queue "
        "USING gin ((payload #>> ''{path}''::text[]) %s.gin_trgm_ops) "
        "WHERE (payload #>> ''{path}''::text[]) IS NOT NULL', ext);")


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


def upgrade() -> None:
    op.create_index("job_queue_portal_id", "job_queue", ["portal", "id"])
    op.create_index("job_queue_type_id", "job_queue", ["job_type", "id"])
    _create_extension()
    op.execute(_INDEXES.format(statements="\n".join(
        _ONE.format(name=name, path=path) for name, path in FIELDS.items())))


def downgrade() -> None:
    for name in FIELDS:
        op.execute(f"DROP INDEX IF EXISTS job_queue_search_{name}")
    # pg_trgm stays: another application of the database may use it
    op.drop_index("job_queue_type_id", table_name="job_queue")
    op.drop_index("job_queue_portal_id", table_name="job_queue")

"""The console's search matches what the console shows (issue 48 #13): a searchable field's
text is masked -- anything shaped like an SSN/ITIN replaced by ``***``, as the pages show it
(:func:`portalq.jobs.secrets.redaction.scrub_ssn_like`) -- before it is indexed or tested.
Before, the list showed ``Acme *** Holdings`` while ``job_search`` held the digits, and a
viewer recovered them in 13 prefix searches (``987``, ``987-``, ``987-6``, ...).

- ``portalq_search_text(text)``: the masking, in SQL (the same pattern as ``_SSN_LIKE``;
  IMMUTABLE, a plain SQL function the planner inlines). The job list's window test and a
  bulk action's selection (``queries.sql``) apply it to ``payload #>> path`` too.
- The two trigger functions of migration 0026 write masked text; the rows already in
  ``job_search`` that hold such a text are masked in place (masking twice changes nothing:
  ``***`` has no digits), a pass over ``job_search`` alone, nothing of ``job_queue`` locked.

Revision ID: 0028
Revises: 0027
"""
from __future__ import annotations

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

#: as migration 0026's
FIELDS = {"legal_name": "{legal_name}", "company_name": "{company_name}",
          "names": "{names}", "applicant.name": "{applicant,name}"}
#: redaction._SSN_LIKE, the same text: PostgreSQL's regular expressions read it alike
#: (lookbehind since 9.6; ``\s`` in brackets); a test compares the two on samples
SSN_LIKE = r"(?<!\d)\d{3}[\s.-]?\d{2}[\s.-]?\d{4}(?!\d)"


def _column(field: str) -> str:
    return field.replace(".", "_")


COLUMNS = [_column(f) for f in FIELDS]


def _rows(source: str, masked: bool) -> str:
    wrap = "portalq_search_text({})" if masked else "{}"
    texts = ", ".join(wrap.format(f"n.payload #>> '{path}'::text[]") + f" AS {_column(field)}"
                      for field, path in FIELDS.items())
    return (f"SELECT * FROM (SELECT n.id AS job_id, {texts} FROM {source}) f "
            f"WHERE num_nonnulls({', '.join(COLUMNS)}) > 0")


def _functions(masked: bool) -> None:
    columns = ", ".join(COLUMNS)
    op.execute(f"""
        CREATE OR REPLACE FUNCTION portalq_job_search_insert() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO job_search (job_id, {columns})
            {_rows("inserted n", masked)};
            RETURN NULL;
        END $$""")
    op.execute(f"""
        CREATE OR REPLACE FUNCTION portalq_job_search_update() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM job_search WHERE job_id = NEW.id;
            INSERT INTO job_search (job_id, {columns})
            {_rows("(SELECT NEW.id, NEW.payload) n", masked)};
            RETURN NULL;
        END $$""")
    # CREATE OR REPLACE drops the pinned search path of migration 0019/0026: pinned again
    for name in ("portalq_job_search_insert", "portalq_job_search_update"):
        op.execute(f"""
            DO $pin$ BEGIN
                EXECUTE format('ALTER FUNCTION {name}() SET search_path = pg_catalog, %I',
                               current_schema());
            END $pin$""")


def upgrade() -> None:
    # no SET search_path on it: a function with one is never inlined into the queries
    op.execute(f"""
        CREATE FUNCTION portalq_search_text(t text) RETURNS text
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $$ SELECT pg_catalog.regexp_replace(t, '{SSN_LIKE}', '***', 'g') $$""")
    _functions(masked=True)
    op.execute(f"""
        UPDATE job_search SET {", ".join(f"{c} = portalq_search_text({c})" for c in COLUMNS)}
        WHERE {" OR ".join(f"{c} ~ '{SSN_LIKE}'" for c in COLUMNS)}""")


def downgrade() -> None:
    _functions(masked=False)
    # the masked rows' texts again as their payloads have them
    op.execute(f"""
        UPDATE job_search s SET {", ".join(
            f"{_column(f)} = q.payload #>> '{p}'::text[]" for f, p in FIELDS.items())}
        FROM job_queue q
        WHERE q.id = s.job_id AND ({" OR ".join(f"s.{c} LIKE '%***%'" for c in COLUMNS)})""")
    op.execute("DROP FUNCTION portalq_search_text(text)")

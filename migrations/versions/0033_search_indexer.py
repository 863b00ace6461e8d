"""The console's search off the enqueue (issue 49.1): ``job_search`` is filled by an
indexer in the service (``portalq.jobs.search_index``), in batches of the queue's own ids,
no longer by a statement trigger in every enqueue's transaction. The batch enqueue paid for
it on every statement (a transition table and an ``INSERT ... SELECT``, ~16 µs a job with a
searched field), whether or not anyone ever searched.

- ``job_search_mark``: one row, the indexer's high-water mark. Every job with
  ``id <= indexed_to`` has its ``job_search`` row (or has no searched field); the search
  tests the jobs above it on the queue itself. ``pending_to`` / ``pending_xmax`` /
  ``pending_since``: where the indexer stopped at a gap in the ids (an id taken by a
  transaction still in flight, or rolled back), and the transactions it waits for.
- The trigger on INSERT goes; the row trigger on a payload patch stays (a patch is rare and
  not on the enqueue's path; a job already indexed must show its new text).
- The mark starts at the highest id there is: the trigger indexed everything up to here
  (dropping it waits for the enqueues in flight, and holds off others until the commit).

Revision ID: 0033
Revises: 0032
"""
from __future__ import annotations

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP TRIGGER job_queue_search_insert ON job_queue")
    op.execute("DROP FUNCTION portalq_job_search_insert()")
    op.execute("""
        CREATE TABLE job_search_mark (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            indexed_to bigint NOT NULL,
            checked_at timestamptz NOT NULL DEFAULT now(),
            pending_to bigint,
            pending_xmax bigint,
            pending_since timestamptz)""")
    op.execute("INSERT INTO job_search_mark (indexed_to) "
               "SELECT coalesce(max(id), 0) FROM job_queue")


def downgrade() -> None:
    from importlib import util
    from pathlib import Path

    # the statement trigger of 0028 again, and the jobs the indexer had not reached yet
    spec = util.spec_from_file_location("m0028", Path(__file__).with_name(
        "0028_search_masked.py"))
    assert spec and spec.loader
    m0028 = util.module_from_spec(spec)
    spec.loader.exec_module(m0028)
    m0028._functions(masked=True)
    op.execute("""
        CREATE TRIGGER job_queue_search_insert AFTER INSERT ON job_queue
        REFERENCING NEW TABLE AS inserted
        FOR EACH STATEMENT EXECUTE FUNCTION portalq_job_search_insert()""")
    op.execute(f"""
        INSERT INTO job_search (job_id, {", ".join(m0028.COLUMNS)})
        {m0028._rows("(SELECT * FROM job_queue WHERE id > (SELECT indexed_to FROM "
                     "job_search_mark)) n", masked=True)}
        ON CONFLICT (job_id) DO NOTHING""")
    op.execute("DROP TABLE job_search_mark")

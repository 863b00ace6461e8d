"""A vacuum of job_queue cleans its indexes even when the churn is a sliver of the table
(migration 0017). Without it PostgreSQL skips the index pass while the dead row versions
sit on under 2 % of the pages -- always the case beside a long history -- and the claim
index keeps the entries of every job claimed since, which every claim then reads (issue
19: 307 -> 1,312 buffers a claim over five drains with 10 M finished jobs)."""

from __future__ import annotations

import psycopg

HISTORY = 40_000   # finished jobs: the churn below is far under 2 % of their pages
CHURN = 300        # jobs that waited, ran and completed since the last vacuum


def _vacuum_verbose(c: psycopg.Connection) -> str:
    said: list[str] = []
    c.add_notice_handler(lambda d: said.append(d.message_primary or ""))
    c.execute("VACUUM (VERBOSE) portalq.job_queue")
    return "\n".join(said)


def _history_and_churn(c: psycopg.Connection) -> None:
    c.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at, attempts,
                               started_at, finished_at, created_at, updated_at)
        SELECT 'name_search', 'hist-' || g, 'bc_corporate_online', '{}', 'completed',
               now(), 1, now(), now(), now(), now()
        FROM generate_series(1, %s) g""", (HISTORY,))
    c.execute("VACUUM portalq.job_queue")
    c.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                               created_at, updated_at)
        SELECT 'name_search', 'new-' || g, 'bc_corporate_online', '{}', 'pending', now(),
               now(), now() FROM generate_series(1, %s) g""", (CHURN,))
    c.execute("UPDATE portalq.job_queue SET status = 'running', started_at = now() "
              "WHERE order_id LIKE 'new-%%'")
    c.execute("UPDATE portalq.job_queue SET status = 'completed', finished_at = now() "
              "WHERE order_id LIKE 'new-%%'")


def test_vacuum_cleans_the_claim_index_beside_a_long_history(dsn):
    with psycopg.connect(dsn, autocommit=True) as c:
        assert "vacuum_index_cleanup=on" in c.execute(
            "SELECT array_to_string(reloptions, ',') FROM pg_class "
            "WHERE relname = 'job_queue'").fetchone()[0]
        _history_and_churn(c)
        said = _vacuum_verbose(c)
    assert "index scan bypassed" not in said
    assert 'index "job_queue_claim"' in said


def test_without_it_the_index_pass_is_skipped(dsn):
    """The same churn with PostgreSQL's default: the claim index is left as it was (what
    the migration is for; this is the check that the test above can fail)."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("ALTER TABLE portalq.job_queue RESET (vacuum_index_cleanup)")
        _history_and_churn(c)
        said = _vacuum_verbose(c)
    assert "index scan bypassed" in said
    assert 'index "job_queue_claim"' not in said

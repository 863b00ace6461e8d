"""The console's search at scale (issue 39, migration 0026) on a real database: a payload
search reaches a job far below the id window in one page, through its trigram index; the
portal and job-type filters read their indexes; per-status counts are estimates; secret
fields are refused; ``%``, ``_`` and ``\\`` are matched literally; a NUL is bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from portalq.jobs import search_index, types
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin.reads import SEARCH_FIELDS, WINDOW, JobFilter
from portalq.jobs.db.sql import query
from portalq.jobs.errors import InputError
from portalq.jobs.secrets import redaction as masking

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


def _fill(c, n: int, *, job_type: str = "file_entity", portal: str = "delaware_icis",
          status: str = "completed") -> None:
    """n jobs (ids rising), each with a legal name of its own: 'Company <g> Inc.'."""
    c.execute("""
        INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                       created_at, updated_at, finished_at)
        SELECT %(t)s, 'O-' || g, %(p)s,
               jsonb_build_object('legal_name', 'Company ' || g || ' Inc.', 'state', 'DE'),
               %(s)s, %(at)s, %(at)s, %(at)s, %(at)s
        FROM generate_series(1, %(n)s) g""", {"t": job_type, "p": portal, "s": status,
                                               "n": n, "at": T0})


def _name(c, job_id: int, legal_name: str) -> None:
    c.execute("UPDATE portalq.job_queue SET payload = payload || jsonb_build_object("
              "'legal_name', %s::text) WHERE id = %s", (legal_name, job_id))


def _ids(page: console_repo.Page) -> list[int]:
    return [r["id"] for r in page.rows]


def test_a_search_reaches_a_job_far_below_the_window_in_one_page(conn):
    _fill(conn, WINDOW + 10_000)
    _name(conn, 7, "Zebra Crossing Holdings Ltd.")
    _name(conn, 12, "The ZEBRA crossing Co.")
    conn.execute("ANALYZE portalq.job_queue")
    page = console_repo.jobs_page(conn, JobFilter(field="legal_name", value="zebra cross"))
    # the id window (the newest 20,000 jobs) holds neither: the index found both, newest first
    assert _ids(page) == [12, 7]
    assert not page.partial and page.next_before is None
    # each row with the searched field's value (the list shows it)
    assert [r["matched"] for r in page.rows] == ["The ZEBRA crossing Co.",
                                                 "Zebra Crossing Holdings Ltd."]
    # a short value cannot use trigrams: the window's search, which says where it stopped
    short = console_repo.jobs_page(conn, JobFilter(field="legal_name", value="ze"))
    assert short.partial and short.rows == [] and short.scanned == WINDOW
    # a field without an index of its own: the window's search too
    other = console_repo.jobs_page(conn, JobFilter(field="state", value="zebra"))
    assert other.partial and other.rows == []


def test_a_search_page_continues_where_it_ended(conn):
    _fill(conn, 30_000)
    for job_id in range(100, 170):          # 70 matches, all below the window
        _name(conn, job_id, f"Quokka Ventures {job_id}")
    first = console_repo.jobs_page(conn, JobFilter(field="legal_name", value="quokka"))
    assert _ids(first) == list(range(169, 119, -1)) and first.next_before == 120
    rest = console_repo.jobs_page(conn, JobFilter(field="legal_name", value="quokka"),
                                  before_id=first.next_before)
    assert _ids(rest) == list(range(119, 99, -1)) and rest.next_before is None
    # the other filters hold in the index's search too
    conn.execute("UPDATE portalq.job_queue SET status = 'failed' WHERE id IN (101, 150)")
    failed = console_repo.jobs_page(conn, JobFilter(field="legal_name", value="quokka",
                                                    status="failed"))
    assert _ids(failed) == [150, 101]


def test_percent_underscore_and_backslash_are_literal(conn):
    _fill(conn, WINDOW + 100)
    names = {3: "100% Pure Maple Ltd.", 4: "1000 Pure Maple Ltd.", 5: "Snake_Case Co.",
             6: "SnakeXCase Co.", 8: r"Back\Slash Co.", 9: "%00 Odd Name Inc."}
    for job_id, name in names.items():
        _name(conn, job_id, name)

    def found(value: str) -> list[int]:
        return _ids(console_repo.jobs_page(conn, JobFilter(field="legal_name", value=value)))

    assert found("100% pure") == [3]            # the index's search
    assert found("snake_case") == [5]
    assert found(r"back\slash") == [8]
    assert found("%00") == [9]                  # the text "%00", not a wildcard
    # a lone % or _ (too short for trigrams): the window's search, literal as well
    assert console_repo.jobs_page(conn, JobFilter(field="legal_name", value="%"),
                                  before_id=10).rows[0]["id"] == 9
    assert _ids(console_repo.jobs_page(conn, JobFilter(field="legal_name", value="_"),
                                       before_id=10)) == [5]
    with pytest.raises(InputError, match="NUL"):
        console_repo.jobs_page(conn, JobFilter(field="legal_name", value="a\x00b"))


def test_secret_fields_are_refused_and_never_indexed(conn):
    for field in ("responsible_party.ssn", "responsible_party"):
        with pytest.raises(InputError, match="secret field"):
            console_repo.jobs_page(conn, JobFilter(field=field, value="6789"))
    # no searchable field is (or holds, or lies in) a secret field of any job type
    assert not [f for f in SEARCH_FIELDS if masking.field_is_secret(types.names(), f)]
    indexes = dict(conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'portalq' "
        "AND tablename = 'job_search' AND indexdef LIKE '%gin_trgm_ops%'").fetchall())
    # one trigram index per searchable field, on its column, and nothing else
    assert sorted(indexes) == sorted(f"job_search_{f.replace('.', '_')}" for f in SEARCH_FIELDS)
    for field in SEARCH_FIELDS:
        definition = indexes[f"job_search_{field.replace('.', '_')}"]
        assert "gin_trgm_ops" in definition and f"({field.replace('.', '_')} " in definition, \
            definition
    assert "ssn" not in json.dumps(indexes) and "itin" not in json.dumps(indexes)
    # the queue itself has no trigram index: its hot path never writes one
    assert not conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'portalq' "
        "AND tablename = 'job_queue' AND indexdef LIKE '%gin%'").fetchall()


def _plan(conn, name: str, params: dict) -> str:
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + query(name), params).fetchone()[0]
    return json.dumps(plan)


def test_filters_and_the_search_read_their_indexes(conn):
    _fill(conn, 5_000)
    _fill(conn, 50, job_type="process_crtc", portal="crtc")
    conn.execute("ANALYZE portalq.job_queue")
    search_index.catch_up(conn)   # the service's indexer (migration 0033) has filled it
    # the state autovacuum brings job_search to: its trigram indexes' pending lists (where
    # the enqueues' entries wait) merged, which the planner's cost of them counts
    conn.execute("VACUUM ANALYZE portalq.job_search")
    base = {**JobFilter().params(), "before_id": 2**62, "floor_id": 0, "window": WINDOW,
            "limit": 50}
    assert "job_queue_portal_id" in _plan(conn, "console_jobs_page", {**base, "portal": "crtc"})
    assert "job_queue_type_id" in _plan(conn, "console_jobs_window",
                                        {**base, "job_type": "process_crtc"})
    for field in SEARCH_FIELDS:
        plan = _plan(conn, "console_jobs_search", {**JobFilter(
            field=field, value="maple leaf").params(), "before_id": 2**62, "floor_id": 0,
            "limit": 50})
        assert f"job_search_{field.replace('.', '_')}" in plan, (field, plan)


def test_status_counts_are_estimates_from_the_statistics(conn):
    _fill(conn, 9_000)
    _fill(conn, 1_000, status="failed")
    conn.execute("ANALYZE portalq.job_queue")
    estimates = console_repo.status_estimates(conn)
    assert estimates == {"completed": 9_000, "failed": 1_000}
    with conn.transaction():
        plan = json.dumps(conn.execute("EXPLAIN (FORMAT JSON) "
                                       + query("console_status_estimates")).fetchone()[0])
    assert "job_queue" not in plan.replace("'portalq.job_queue'", ""), plan


def test_masked_digits_cannot_be_recovered_by_search(conn):
    """Issue 48 #13: a legal name with an SSN-shaped text is listed as ``***``; searching its
    digits, prefix by prefix, must find nothing -- neither through the trigram index (a job
    below the id window) nor the window's own test, nor a bulk action's selection."""
    _fill(conn, WINDOW + 100)
    _name(conn, 7, "Acme 987-65-4321 Holdings")                 # below the window
    _name(conn, WINDOW + 90, "Birch 987 65 4321 Trust")         # inside it
    _name(conn, WINDOW + 91, "Cedar 987654321 LLC")
    # digits of another script: masked by the pages, not by PostgreSQL's regular expressions
    _name(conn, 8, "Dune ٩٨٧-٦٥-٤٣٢١ Trust")

    def found(value: str) -> list[int]:
        return _ids(console_repo.jobs_page(conn, JobFilter(field="legal_name", value=value)))

    masked = {7, 8, WINDOW + 90, WINDOW + 91}
    # the prefix searches that recovered the digits one by one: none finds these jobs any
    # more (the fill's own names, 'Company <n> Inc.', hold some of the shorter ones)
    secret = "987-65-4321"
    for end in range(3, len(secret) + 1):
        assert not masked & set(found(secret[:end])), secret[:end]
    for value in ("987 65", "98765", "654321", "5-4321", "4321", "e 987", " 987654321 ",
                  "٩٨٧", "٩٨٧-٦٥", "dune ٩"):
        assert not masked & set(found(value)), value
    for value in ("987-65", "٩٨٧-٦٥"):
        assert console_repo.ids_matching(conn, JobFilter(field="legal_name", value=value),
                                         ("completed",), 100) == [], value
    # what the list shows still finds them, shown masked
    page = console_repo.jobs_page(conn, JobFilter(field="legal_name", value="holdings"))
    assert [(r["id"], r["matched"]) for r in page.rows] == [(7, "Acme *** Holdings")]
    assert found("acme ***") == [7]
    assert found("birch") == [WINDOW + 90] and found("cedar") == [WINDOW + 91]
    assert found("dune") == [8]
    # the window's test too finds what the page shows, "***" included
    assert found("birch ***") == [WINDOW + 90]
    assert console_repo.ids_matching(conn, JobFilter(field="legal_name", value="birch ***"),
                                     ("completed",), 100) == [WINDOW + 90]
    # the index holds no digits of it either
    assert conn.execute("SELECT legal_name FROM portalq.job_search WHERE job_id = 7"
                        ).fetchone()[0] == "Acme *** Holdings"


@pytest.mark.parametrize("text", [
    "Acme 987-65-4321 Holdings", "987654321", "x987 65 4321y", "987.65.4321", "1987-65-4321",
    "987-65-43210", "12-345-6789", "98765-4321 and 123-45-6789", "Company 42 Inc.",
    "987\t65\n4321", "987--65-4321"])
def test_the_search_masks_as_the_pages_do(conn, text):
    """The database's masking (migration 0028) and the pages' (redaction.scrub_ssn_like)
    agree: a text the page shows masked is indexed masked."""
    in_sql = conn.execute("SELECT portalq.portalq_search_text(%s)", (text,)).fetchone()[0]
    assert in_sql == masking.scrub_ssn_like(text)

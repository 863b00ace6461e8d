"""`portalq adopt`: the business's old queue (the legacy ``job_queue`` of issue 36) taken
over, on a real PostgreSQL: a dry run's report, the import, a second import that adds
nothing, the legacy table byte for byte as it was, and bad input refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import pytest

from portalq.jobs import queue
from tests import payloads
from tests.conftest import ROOT, run_cli
from tests.integration.test_beside_the_app import _fingerprint

SSN = payloads.OBTAIN_EIN["responsible_party"]["ssn"]

LEGACY = """
CREATE TABLE public.job_queue (           -- the app's migration 015_job_queue.sql
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
CREATE TABLE public.orders (id text PRIMARY KEY, filing jsonb NOT NULL);
"""

#: (job_type, payload, status, attempts, last_error, run_at offset, order_id)
ROWS = [
    ("name_search", payloads.NAME_SEARCH, "pending", 0, None, "-1 hour", "ORD-1"),
    ("obtain_ein", payloads.OBTAIN_EIN, "deferred", 1, "portal closed", "2 days", "ORD-2"),
    ("file_entity", {"state": "BC"}, "pending", 0, None, "0", "ORD-3"),   # its order's payload
    ("name_search", payloads.NAME_SEARCH, "running", 1, None, "-5 minutes", "ORD-4"),
    ("obtain_ein", payloads.OBTAIN_EIN, "failed", 3,
     f"IRS: the SSN {SSN} already has an EIN", "-1 day", "ORD-5"),
    ("name_search", payloads.NAME_SEARCH, "done", 1, None, "-3 days", "ORD-6"),
    ("name_search", payloads.NAME_SEARCH, "completed", 1, None, "-3 days", "ORD-7"),
    ("send_fax\nnow", {"to": "+1 604 555 0100"}, "pending", 0, None, "0", "ORD-8"),
    ("name_search", {"names": []}, "pending", 0, None, "0", "ORD-9"),
    ("name_search", payloads.NAME_SEARCH, "paused", 0, None, "0", "ORD-10"),
    ("name_search", payloads.NAME_SEARCH, "pending", 0, None, "0", None),
    ("bc_name_search", payloads.NAME_SEARCH, "pending", 0, None, "0", "ORD-12"),  # mapped
    ("file_entity", {}, "pending", 0, None, "0", "ORD-404"),   # no such order
    ("ledger_job", {"portal": "nowhere"}, "pending", 0, None, "0", "ORD-14"),  # a plugin's
]

ORDER_SQL = {"PORTALQ_ORDER_SQL_FILE_ENTITY":
             "SELECT filing FROM public.orders WHERE id = %(order_id)s"}


def _legacy(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(LEGACY)
        for job_type, payload, status, attempts, error, offset, order in ROWS:
            c.execute("INSERT INTO public.job_queue (job_type, payload, status, attempts, "
                      "last_error, run_at, portal_tz, portal_hours, order_id, order_type) "
                      "VALUES (%s, %s, %s, %s, %s, now() + %s::interval, 'America/New_York', "
                      "'08:00-22:30', %s, 'llc')",
                      (job_type, json.dumps(payload), status, attempts, error, offset, order))
        c.execute("INSERT INTO public.orders VALUES ('ORD-3', %s)",
                  (json.dumps(payloads.FILE_ENTITY_BC),))


def _jobs(dsn: str) -> dict[str, dict]:
    with psycopg.connect(dsn) as c, c.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return {r["idempotency_key"]: r for r in cur.execute(
            "SELECT * FROM portalq.job_queue ORDER BY id")}


def _adopt(db: str, *args: str) -> object:
    return run_cli("adopt", "--map-type", "bc_name_search=name_search", *args,
                   env={"PORTALQ_DATABASE_URL": db, "PORTALQ_PLUGINS": "tests.plugins.ledger",
                        "PYTHONPATH": str(ROOT), **ORDER_SQL})


def test_the_old_queue_is_reported_imported_once_and_left_as_it_was(db, dsn):
    _legacy(dsn)
    with psycopg.connect(dsn) as c:
        before = _fingerprint(c)

    dry = _adopt(db)   # the default: a dry run
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.strip().splitlines()
    assert len(lines) == len(ROWS) + 2   # the rows, the old table's plaintext, the summary
    by_row = {int(ln.split()[1]): ln for ln in lines[:-2]}
    assert lines[-2].startswith("2 rows of public.job_queue hold secret fields in plaintext")
    assert by_row[1].startswith("row 1 pending name_search ORD-1: would become a pending job")
    assert "would become a pending job, run at " in by_row[2]      # its run_at kept
    assert by_row[3].startswith("row 3 pending file_entity ORD-3: would become a pending job")
    assert "would become a failed job waiting for a person" in by_row[4]
    assert "would become a failed job with its last error" in by_row[5]
    assert by_row[6].endswith("finished, counted") and by_row[7].endswith("finished, counted")
    assert by_row[8].startswith("row 8 pending send_fax?now ORD-8: skipped: unknown job "
                                "type 'send_fax\\nnow'")   # one line each, whatever the row holds
    assert "skipped: invalid name_search payload: names:" in by_row[9]
    assert "skipped: unknown status 'paused'" in by_row[10]
    assert by_row[11].endswith("skipped: no order id")
    assert by_row[12].startswith("row 12 pending bc_name_search -> name_search ORD-12: "
                                 "would become a pending job")
    assert by_row[13].endswith("skipped: no order 'ORD-404' found by "
                               "PORTALQ_ORDER_SQL_FILE_ENTITY")
    assert by_row[14].endswith("skipped: unknown portal 'nowhere' (none such in portalq)")
    assert lines[-1] == ("14 rows: to import 6 (deferred 1, failed 1, pending 3, running 1), "
                         "already imported 0, finished 2, skipped 6; dry run, nothing "
                         "written (--apply imports)")
    assert SSN not in dry.stdout and "123456789" not in dry.stdout
    assert _jobs(dsn) == {}

    out = _adopt(db, "--apply")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == (
        "14 rows: imported 6 (deferred 1, failed 1, pending 3, running 1), already imported "
        "0, finished 2, skipped 6")
    jobs = _jobs(dsn)
    key = "legacy:public.job_queue:{}".format
    assert sorted(jobs) == sorted(key(i) for i in (1, 2, 3, 4, 5, 12))
    assert {k: (j["job_type"], j["order_id"], j["status"]) for k, j in jobs.items()} == {
        key(1): ("name_search", "ORD-1", "pending"),
        key(2): ("obtain_ein", "ORD-2", "pending"),
        key(3): ("file_entity", "ORD-3", "pending"),
        key(4): ("name_search", "ORD-4", "failed"),
        key(5): ("obtain_ein", "ORD-5", "failed"),
        key(12): ("name_search", "ORD-12", "pending")}
    with psycopg.connect(dsn) as c:
        legacy_run_at = dict(c.execute("SELECT id, run_at FROM public.job_queue").fetchall())
    assert jobs[key(2)]["run_at"] == legacy_run_at[2]        # deferred: waits as it did
    # the order source built the payload, not the legacy row's
    assert jobs[key(3)]["payload"]["legal_name"] == payloads.FILE_ENTITY_BC["legal_name"]
    # sealed like any payload: no SSN in the stored payload or error
    for k in (key(2), key(5)):
        stored = json.dumps(jobs[k]["payload"])
        assert jobs[k]["secret_data"] is not None and SSN not in stored, stored
    assert "already has an EIN" in jobs[key(5)]["last_error"]
    assert "6789" not in jobs[key(5)]["last_error"]
    # the running one waits for a person: a submission in doubt and an uncertain escalation
    running = jobs[key(4)]
    assert running["checkpoint"]["submissions"]["legacy"]["state"] == "submitting"
    with psycopg.connect(dsn) as c:
        escalations = c.execute("SELECT job_id, kind FROM portalq.escalations").fetchall()
    assert escalations == [(running["id"], "uncertain")]

    again = _adopt(db, "--apply")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == (
        "14 rows: imported 0, already imported 6, finished 2, skipped 6")
    assert f"row 4 running name_search ORD-4: already imported as job {running['id']}" in (
        again.stdout)
    assert {k: (j["id"], j["status"], j["updated_at"]) for k, j in _jobs(dsn).items()} == {
        k: (j["id"], j["status"], j["updated_at"]) for k, j in jobs.items()}
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM portalq.escalations").fetchone()[0] == 1
        assert _fingerprint(c) == before          # the legacy table, byte for byte

    # a person checked the portal: not filed, so the job goes back to the queue
    queue.resolve_not_filed(running["id"], actor="ops")
    assert queue.get_job(running["id"])["status"] == "pending"


@pytest.mark.parametrize("args, message", [
    (("--table", "public.nope"), "no table public.nope"),
    (("--table", "public.orders"), "public.orders is not a legacy job queue: no column"),
    (("--table", "x; DROP TABLE y"), "give schema.name"),
    (("--table", "portalq.job_queue"), "portalq's own schema"),
    (("--apply", "--dry-run"), "not both"),
    (("--map-type", "fax"), "give OLD=NEW"),
    (("--table", "public.odd_queue"), "public.odd_queue is not a legacy job queue: its id"),
])
def test_bad_input_is_one_line_and_writes_nothing(db, dsn, args, message):
    _legacy(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:   # the shape, but a text id
        c.execute("CREATE TABLE public.odd_queue AS SELECT id::text || 'x' AS id, job_type, "
                  "payload, status, attempts, last_error, run_at, order_id "
                  "FROM public.job_queue")
    out = _adopt(db, "--apply", *args) if "--apply" not in args else _adopt(db, *args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1 and message in out.stderr, out.stderr
    assert _jobs(dsn) == {}


def test_a_key_taken_by_a_job_of_another_type_skips_the_row(db, dsn):
    _legacy(dsn)
    other = queue.enqueue("deliver", "ORD-1", payloads.DELIVER,
                          idempotency_key="legacy:public.job_queue:1").id
    for args in ((), ("--apply",)):
        out = _adopt(db, *args)
        assert out.returncode == 0, out.stderr
        assert (f"row 1 pending name_search ORD-1: skipped: its key legacy:public.job_queue:1 "
                f"is taken by job {other}, a deliver job") in out.stdout
    assert _jobs(dsn)["legacy:public.job_queue:1"]["id"] == other
    assert len(_jobs(dsn)) == 6


# -- issue 48, item 15 ----------------------------------------------------------------------

def test_a_pending_row_held_at_the_end_of_time_is_skipped_not_due_at_once(db, dsn):
    """A legacy app parked a row with run_at 9999-12-31 (a hold): it used to become a job
    due at once."""
    _legacy(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        held = c.execute("INSERT INTO public.job_queue (job_type, payload, status, run_at, "
                         "order_id) VALUES ('name_search', %s, 'pending', "
                         "'9999-12-31 00:00:00+00', 'ORD-HELD') RETURNING id",
                         (json.dumps(payloads.NAME_SEARCH),)).fetchone()[0]
    for args in ((), ("--apply",)):
        out = _adopt(db, *args)
        assert out.returncode == 0, out.stderr
        [shown] = [ln for ln in out.stdout.splitlines() if ln.startswith(f"row {held} ")]
        assert shown.startswith(f"row {held} pending name_search ORD-HELD: skipped: run at "
                                "9999-12-31"), shown
    assert f"legacy:public.job_queue:{held}" not in _jobs(dsn)


def test_plaintext_secrets_left_in_the_old_table_are_said_and_blanked_once_imported(db, dsn):
    _legacy(dsn)
    with psycopg.connect(dsn) as c:
        def legacy_ssns() -> dict[int, str]:
            return {i: p["responsible_party"]["ssn"] for i, p in c.execute(
                "SELECT id, payload FROM public.job_queue WHERE job_type = 'obtain_ein' "
                "ORDER BY id")}
        assert legacy_ssns() == {2: SSN, 5: SSN}

        dry = _adopt(db)
        note = ("2 rows of public.job_queue hold secret fields in plaintext "
                "(responsible_party.ssn); the old table is left as it was. Once the import "
                "is verified, blank them there: portalq adopt --blank-secrets")
        assert note in dry.stdout, dry.stdout
        assert dry.stdout.strip().splitlines()[-1].startswith("14 rows: to import 6")
        # before anything was imported there is nothing it may blank
        early = _adopt(db, "--blank-secrets")
        assert early.returncode == 0, early.stderr
        assert "blanked the secret fields of 0 rows (only rows imported into portalq)" in (
            early.stdout)
        c.rollback()
        assert legacy_ssns() == {2: SSN, 5: SSN}

        assert _adopt(db, "--apply").returncode == 0
        both = _adopt(db, "--apply", "--blank-secrets")
        assert both.returncode == 2 and "not both" in both.stderr
        blanked = _adopt(db, "--blank-secrets")
        assert blanked.returncode == 0, blanked.stderr
        assert "blanked the secret fields of 2 rows" in blanked.stdout
        assert SSN not in blanked.stdout
        c.rollback()
        assert legacy_ssns() == {2: "", 5: ""}
    # portalq's own copies are untouched (sealed at the import)
    jobs = _jobs(dsn)
    assert jobs["legacy:public.job_queue:2"]["secret_data"] is not None
    again = _adopt(db)
    assert "hold secret fields in plaintext" not in again.stdout


def _peak_rss_mb(db: str, *args: str) -> float:
    """The CLI's peak resident memory (its own process: os.wait4's rusage)."""
    env = {**os.environ, "PORTALQ_DATABASE_URL": db, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "portalq", "adopt", *args], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read() if proc.stderr else ""
    return usage.ru_maxrss / 1024


def test_a_large_old_table_is_streamed_not_read_into_memory(db, dsn):
    """150 MB of legacy payloads took 358 MB of RSS: every row was read at once. Here 72 MB
    of payloads (1,500 finished rows of 40 kB, the kind an old queue keeps most of, and 300
    pending ones to import) against the same table with the 1,800 rows' payloads small."""
    blob = "x" * 40_000
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(LEGACY)
        for name, size in (("small", 10), ("large", len(blob))):
            c.execute(f"CREATE TABLE public.{name} (LIKE public.job_queue INCLUDING ALL)")
            c.execute(f"INSERT INTO public.{name} (job_type, payload, status, order_id) "
                      "SELECT 'name_search', %s::jsonb || jsonb_build_object('note', "
                      "repeat('x', %s)), CASE WHEN i <= 300 THEN 'pending' ELSE 'done' END, "
                      "'ORD-' || i FROM generate_series(1, 1800) i",
                      (json.dumps(payloads.NAME_SEARCH), size))
        size_mb = c.execute("SELECT sum(octet_length(payload::text)) / 1e6 FROM public.large"
                            ).fetchone()[0]
    assert size_mb > 55
    small = _peak_rss_mb(db, "--table", "public.small")
    large = _peak_rss_mb(db, "--table", "public.large")
    print(f"adopt dry run: peak RSS {small:.0f} MB (small payloads), {large:.0f} MB "
          f"({size_mb:.0f} MB of payloads)")
    assert large - small < 25, (small, large)

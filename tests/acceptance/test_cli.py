"""The real `portalq` CLI in a subprocess: happy paths and bad input (one line, non-zero,
nothing written)."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests import payloads
from tests.conftest import run_cli


def jobs_in(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0]


def test_enqueue_list_show_cancel_retry(db, dsn, tmp_path):
    out = run_cli("enqueue", "name_search", "--order", "ORD-1001",
                  "--payload", json.dumps(payloads.NAME_SEARCH))
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout.strip())

    payload_file = tmp_path / "ein.json"
    payload_file.write_text(json.dumps(payloads.OBTAIN_EIN))
    out = run_cli("enqueue", "obtain_ein", "--order", "ORD-1002", "--payload-file",
                  str(payload_file), "--json", "--priority", "3")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert row["portal"] == "irs_ein" and row["priority"] == 3 and row["created"] is True
    assert "6789" not in out.stdout  # the SSN is sealed: not even its last digits shown
    assert row["payload"]["responsible_party"]["ssn"] == "[encrypted]"

    out = run_cli("jobs", "list", "--json", "--order", "ORD-1001")
    assert [r["id"] for r in json.loads(out.stdout)] == [job_id]
    out = run_cli("jobs", "list")
    assert "ORD-1001" in out.stdout and "ORD-1002" in out.stdout

    out = run_cli("jobs", "show", str(job_id))
    assert out.returncode == 0 and "-> pending" in out.stdout

    assert run_cli("jobs", "cancel", str(job_id)).returncode == 0
    shown = json.loads(run_cli("jobs", "show", str(job_id), "--json").stdout)
    assert shown["status"] == "cancelled"
    assert [e["to_status"] for e in shown["events"]] == ["pending", "cancelled"]
    assert run_cli("jobs", "retry", str(job_id)).returncode == 0
    assert json.loads(run_cli("jobs", "show", str(job_id), "--json").stdout)["status"] == "pending"


def test_idempotency_key_from_cli(db, dsn):
    args = ("enqueue", "name_search", "--order", "O", "--payload",
            json.dumps(payloads.NAME_SEARCH), "--idempotency-key", "k-1")
    first, second = run_cli(*args), run_cli(*args)
    assert first.stdout == second.stdout and jobs_in(dsn) == 1


def test_options_from_environment(db, dsn):
    out = run_cli("enqueue", "name_search", "--payload", json.dumps(payloads.NAME_SEARCH),
                  "--json", env={"PORTALQ_ORDER": "ORD-ENV", "PORTALQ_PRIORITY": "7"})
    row = json.loads(out.stdout)
    assert (row["order_id"], row["priority"]) == ("ORD-ENV", 7)


@pytest.mark.parametrize("args, message", [
    (["enqueue", "bogus", "--order", "O"], "unknown job type 'bogus'"),
    (["enqueue", "name_search", "--order", "O", "--payload", "{not json"],
     "payload is not valid JSON"),
    (["enqueue", "name_search", "--order", "O", "--payload", "[1]"], "must be a JSON object"),
    (["enqueue", "name_search", "--order", "O", "--payload", '{"names": []}'],
     "invalid name_search payload: names"),
    (["enqueue", "name_search", "--order", "O", "--payload", json.dumps(payloads.NAME_SEARCH),
      "--run-at", "tomorrow"], "--run-at: not an ISO 8601 instant"),
    (["enqueue", "name_search", "--order", "O", "--payload", json.dumps(payloads.NAME_SEARCH),
      "--run-at", "2026-12-01T09:00:00"], "needs a UTC offset"),
    (["enqueue", "name_search", "--order", "O", "--payload", json.dumps(payloads.NAME_SEARCH),
      "--portal", "moon"], "name_search jobs go to portal bc_corporate_online, not 'moon'"),
    (["enqueue", "name_search", "--order", "O", "--payload-file", "/nonexistent.json"],
     "cannot read payload file"),
    (["enqueue", "name_search"], "Missing option '--order'"),
    (["enqueue", "name_search", "--order", "O", "--max-attempts", "0",
      "--payload", json.dumps(payloads.NAME_SEARCH)], "max attempts must be 1..100"),
    (["jobs", "show", "424242"], "no job with id 424242"),
    (["jobs", "show", "abc"], "Invalid value"),
    (["jobs", "cancel", "424242"], "no job with id 424242"),
    (["jobs", "retry", "424242"], "no job with id 424242"),
    (["jobs", "list", "--status", "sleeping"], "unknown status 'sleeping'"),
])
def test_bad_input_one_line_nonzero_nothing_written(db, dsn, args, message):
    out = run_cli(*args)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("portalq: error: ") and message in lines[0], lines[0]
    assert jobs_in(dsn) == 0


def test_illegal_transition_exit_code(db, dsn):
    job_id = run_cli("enqueue", "name_search", "--order", "O", "--payload",
                     json.dumps(payloads.NAME_SEARCH)).stdout.strip()
    out = run_cli("jobs", "retry", job_id)
    assert out.returncode == 3 and "only failed or cancelled jobs" in out.stderr


def test_migrate_is_idempotent_and_prints_sql(db):
    from portalq.jobs.db.migrate import head_revision

    out = run_cli("migrate")
    assert out.returncode == 0 and f"schema at {head_revision()}" in out.stdout
    out = run_cli("migrate", "--sql")
    assert "CREATE TABLE job_queue" in out.stdout


def test_database_down_is_one_line(tmp_path):
    out = run_cli("jobs", "list", env={
        "PORTALQ_DATABASE_URL": f"postgresql://nobody@/x?host={tmp_path}"})
    assert out.returncode == 4
    assert out.stderr.startswith("portalq: error: database unavailable")
    assert len(out.stderr.strip().splitlines()) == 1


def test_enqueue_batch_all_or_nothing(db, dsn, tmp_path):
    good = tmp_path / "jobs.jsonl"
    lines = [json.dumps({"job_type": "name_search", "order": f"ORD-{i}",
                         "payload": payloads.NAME_SEARCH, "idempotency_key": f"k{i % 40}"})
             for i in range(50)]
    good.write_text("\n".join(lines) + "\n")
    out = run_cli("enqueue-batch", str(good), "--chunk", "7")
    assert out.returncode == 0, out.stderr
    assert "40 job(s) enqueued, 10 already existed" in out.stdout
    assert jobs_in(dsn) == 40
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:3], json.dumps({"job_type": "name_search",
                   "order": "X", "payload": {"names": []}}), *lines[3:5]]) + "\n")
    fresh = tmp_path / "fresh.jsonl"
    fresh.write_text(bad.read_text().replace('"k', '"new-k'))
    out = run_cli("enqueue-batch", str(fresh), "--chunk", "2")
    assert out.returncode == 2 and "invalid name_search payload" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert jobs_in(dsn) == 40  # the valid lines of the bad file were not written either
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + "\n{oops\n")
    out = run_cli("enqueue-batch", str(broken))
    assert out.returncode == 2 and "broken.jsonl:2: not valid JSON" in out.stderr
    # the file is read a chunk at a time: a bad line after three chunks were written (in
    # the one transaction) still leaves nothing behind
    late = tmp_path / "late.jsonl"
    late.write_text("\n".join(line.replace('"k', '"late-k') for line in lines[:6])
                    + "\n{oops\n")
    out = run_cli("enqueue-batch", str(late), "--chunk", "2")
    assert out.returncode == 2 and "late.jsonl:7: not valid JSON" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert jobs_in(dsn) == 40
    # and from a pipe, which has no size to read first
    piped = "\n".join(line.replace('"k', '"pipe-k') for line in lines[:5]) + "\n"
    out = run_cli("enqueue-batch", "/dev/stdin", "--chunk", "2", input=piped)
    assert out.returncode == 0, out.stderr
    assert "5 job(s) enqueued, 0 already existed" in out.stdout
    assert jobs_in(dsn) == 45

"""`portalq status --once / --json`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from portalq.jobs import queue
from tests import payloads
from tests.conftest import run_cli


def test_status_snapshot_json_and_text(db):
    queue.enqueue("name_search", "ORD-1", payloads.NAME_SEARCH)
    later = datetime.now(UTC) + timedelta(days=2)
    queue.enqueue("process_crtc", "ORD-2", payloads.PROCESS_CRTC, run_at=later)
    out = run_cli("status", "--json")
    assert out.returncode == 0, out.stderr
    snap = json.loads(out.stdout)
    assert snap["depth"] == {"bc_corporate_online": {"pending": 1}, "crtc": {"pending": 1}}
    assert snap["running"] == [] and snap["failures"] == []
    text = run_cli("status", "--once", env={"COLUMNS": "160"}).stdout
    assert "bc_corporate_online" in text and "recent failures" in text


def test_a_database_without_portalq_schema_says_to_migrate(pg_server):
    """Issue 35 item 12: pointed at a database without portalq's tables (the demo's second
    terminal looked at ``portalq``, the demo uses ``portalq_demo``), commands answered
    ``database error (UndefinedTable, SQLSTATE 42P01)``."""
    name = "t_empty_sec_status"
    pg_server.drop(name)
    with pg_server.admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        env = {"PORTALQ_DATABASE_URL": pg_server.url(name)}
        for args in (("status", "--once"), ("jobs", "list"), ("status", "--json")):
            out = run_cli(*args, env=env)
            assert out.returncode != 0 and out.stderr.count("\n") == 1, (args, out.stderr)
            assert "no portalq schema" in out.stderr and "portalq migrate" in out.stderr, \
                (args, out.stderr)
    finally:
        pg_server.drop(name)


def test_the_demo_line_for_a_second_terminal_points_it_at_the_demo_database(db, tmp_path):
    """Issue 35 item 12: the demo prints the export line a second terminal needs; the line,
    run by a shell, makes ``portalq status`` there answer from that database -- and (issue
    48 #14) ``portalq console`` there find the demo's screenshots and traces, which it
    showed as broken images without PORTALQ_ARTIFACTS_DIR."""
    import subprocess

    from portalq.scheduler.config import Settings
    from portalq.scheduler.demo import second_terminal

    url = db   # a URL with ? and & in it: the shell must take it whole
    artifacts = tmp_path / "demo artifacts"   # a space: the shell must take it whole too
    line = second_terminal(url, artifacts)
    assert line.startswith("export PORTALQ_DATABASE_URL=")
    shell = subprocess.run(["sh", "-c", f"{line}\nprintf '%s\\n%s' \"$PORTALQ_DATABASE_URL\" "
                            "\"$PORTALQ_ARTIFACTS_DIR\""],
                           capture_output=True, text=True, check=True)
    got_url, got_artifacts = shell.stdout.split("\n")
    assert got_url == url
    assert Settings(artifacts_dir=got_artifacts).artifacts() == artifacts
    out = run_cli("status", "--json", env={"PORTALQ_DATABASE_URL": got_url})
    assert out.returncode == 0, out.stderr
def test_a_job_waiting_on_its_portal_says_since_and_expected_by(db, dsn):
    """A deferred job whose checkpoint holds the waiting marker (jobs/waiting.py): `jobs
    show` and `status` say "waiting on <portal> since ..., expected by ..."."""
    import psycopg
    from psycopg.types.json import Jsonb

    from portalq.jobs import waiting
    from portalq.portals import lookups

    job = queue.enqueue("process_crtc", "ORD-W", payloads.PROCESS_CRTC).id
    since = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
    rule = lookups.rule("crtc", "crtc_registration")
    mark = waiting.waiting({}, rule, since=since, now=since + timedelta(hours=1),
                           what="CRTC staff to process CRTC-2026-000123")
    with psycopg.connect(dsn) as c:   # as the worker leaves it after a check
        c.execute("UPDATE portalq.job_queue SET status = 'deferred', run_at = %s, checkpoint = %s "
                  "WHERE id = %s", (datetime.fromisoformat(mark["next_check"]),
                                    Jsonb({"waiting": mark}), job))
    expected = ("waiting on crtc since 2026-12-01 15:00 UTC, expected by 2026-12-11 15:00 UTC "
                "(CRTC staff to process CRTC-2026-000123)")
    shown = run_cli("jobs", "show", str(job))
    assert shown.returncode == 0, shown.stderr
    assert f"      waiting: {expected}" in shown.stdout.splitlines()
    text = run_cli("status", "--once", env={"COLUMNS": "400"}).stdout
    assert "waiting on crtc since 2026-12-01 15:00 UTC" in text

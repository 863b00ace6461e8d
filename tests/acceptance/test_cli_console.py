"""`portalq users`, `portalq audit` and `portalq console` as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psycopg

from tests.conftest import ROOT, run_cli

PW = "a password long enough\n"


def test_users_add_passwd_disable_list_and_their_audit(db, dsn):
    out = run_cli("users", "add", "ada", "--role", "operator", input=PW)
    assert out.returncode == 0 and "ada added (operator)" in out.stdout, out.stderr
    again = run_cli("users", "add", "ada", "--role", "admin", input=PW)
    assert again.returncode == 3 and again.stderr.startswith("portalq: error: user 'ada' exists")
    assert run_cli("users", "passwd", "ada", input="another long password\n").returncode == 0
    listed = json.loads(run_cli("users", "list", "--json").stdout)
    assert [(u["name"], u["role"], u["disabled_at"]) for u in listed] == [("ada", "operator",
                                                                           None)]
    assert "password_hash" not in listed[0]
    assert run_cli("users", "disable", "ada").returncode == 0
    assert run_cli("users", "disable", "ada").returncode == 3
    assert "disabled" in run_cli("users", "list").stdout
    rows = json.loads(run_cli("audit", "--json").stdout)
    assert [r["action"] for r in rows] == ["user.disable", "user.passwd", "user.add"]
    assert all(r["source"] == "cli" and r["actor"].startswith("cli:") for r in rows)
    assert "user.add" in run_cli("audit").stdout
    with psycopg.connect(dsn) as c:
        assert "long enough" not in json.dumps(c.execute(
            "SELECT * FROM portalq.audit_log").fetchall(), default=str)


def test_users_bad_input_writes_nothing(db, dsn):
    cases = [(("users", "add", "bob", "--role", "root"), PW, "unknown role"),
             (("users", "add", "bob", "--role", "viewer"), "short\n", "at least 12"),
             (("users", "add", "bad name!", "--role", "viewer"), PW, "user name"),
             (("users", "add", "bob", "--role", "viewer"), "", "no password"),
             (("users", "passwd", "nobody"), PW, "no user 'nobody'")]
    for args, stdin, message in cases:
        out = run_cli(*args, input=stdin)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.startswith("portalq: error: ") and message in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM portalq.console_users").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM portalq.audit_log").fetchone()[0] == 0


def test_console_serves_on_localhost_with_security_headers(db, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PORTALQ_HOME": str(tmp_path), "PORTALQ_CONSOLE_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "portalq", "console"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2) as r:
                    body, headers = r.read().decode(), r.headers
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.monotonic() < deadline, "no console"
                time.sleep(0.1)
        assert "Sign in" in body and "<script>" not in body
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"
        secret = tmp_path / "console-secret"
        assert secret.stat().st_mode & 0o777 == 0o600
        # a page without a session sends to the sign-in page
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs.json", timeout=5)
            raise AssertionError("no 401")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
    finally:
        proc.terminate()
        proc.wait(15)


def test_cli_job_actions_are_audited_with_their_reason(db, dsn):
    """Invariant 14: an admin action from the CLI is on record like one from the console."""
    from portalq.jobs import queue
    from tests import payloads

    job = queue.enqueue("obtain_ein", "ORD-A1", payloads.OBTAIN_EIN)
    assert run_cli("jobs", "cancel", str(job.id)).returncode == 0
    out = run_cli("jobs", "retry", str(job.id), "--payload-patch",
                  '{"responsible_party": {"ssn": "123-45-6789"}}', "--note", "customer asked")
    assert out.returncode == 0, out.stderr
    rows = json.loads(run_cli("audit", "--json").stdout)
    assert [(r["action"], r["target"], r["reason"], r["source"]) for r in rows] == [
        ("job.retry_with_payload", f"job:{job.id}", "customer asked", "cli"),
        ("job.cancel", f"job:{job.id}", "portalq jobs cancel", "cli")]
    assert rows[1]["before"]["status"] == "pending" and rows[1]["after"]["status"] == "cancelled"
    with psycopg.connect(dsn) as c:   # the SSN is in no audit row
        text = json.dumps(c.execute("SELECT * FROM portalq.audit_log").fetchall(), default=str)
    assert "6789" not in text


def test_console_with_half_configured_sign_on_stops_with_one_line(db, tmp_path):
    secret = tmp_path / "oidc-secret"
    secret.write_text("the-client-secret\n")
    secret.chmod(0o644)
    out = run_cli("console", "--port", "0", env={
        "PORTALQ_CONSOLE_OIDC_ISSUER": "https://sso.example.com/realms/corp",
        "PORTALQ_CONSOLE_OIDC_CLIENT_ID": "portalq", "PORTALQ_CONSOLE_OIDC_ADMINS": "admins",
        "PORTALQ_CONSOLE_URL": "https://portalq.example.com",
        "PORTALQ_CONSOLE_OIDC_CLIENT_SECRET_FILE": str(secret)})
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("portalq: error: the OIDC client secret file") \
        and "chmod 600" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "the-client-secret" not in out.stderr + out.stdout

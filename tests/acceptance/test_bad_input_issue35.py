"""Issue 35 item 6: bad input that still gave a traceback, was used without complaint or
was stored raw -- each now one line ``portalq: error: ...``, non-zero, nothing written."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests import payloads
from tests.conftest import run_cli

SSN = payloads.OBTAIN_EIN["responsible_party"]["ssn"]


def jobs_in(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0]


def one_line(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert out.returncode not in (0, 1), (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("portalq: error: "), out.stderr
    for needle in needles:
        assert needle in out.stderr, out.stderr


def ein(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli("enqueue", "obtain_ein", "--order", "ORD-K", "--payload",
                   json.dumps(payloads.OBTAIN_EIN), env=env)


@pytest.fixture
def keydir(tmp_path: Path) -> Path:
    d = tmp_path / "k"
    d.mkdir(mode=0o700)
    return d


def test_a_key_file_that_is_not_a_keyring_is_one_line(db, dsn, keydir: Path):
    bad = keydir / "keys.json"
    bad.write_text("this is not JSON")
    bad.chmod(0o600)
    binary = keydir / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    binary.chmod(0o600)
    for path in (bad, binary, Path("/dev/null"), keydir):
        for args in (("keys", "status"),):
            one_line(run_cli(*args, env={"PORTALQ_KEY_FILE": str(path)}), str(path))
        one_line(ein({"PORTALQ_KEY_FILE": str(path)}), str(path))
    assert jobs_in(dsn) == 0


def test_a_key_file_others_may_read_is_refused(db, dsn, keydir: Path):
    good = keydir / "keys.json"
    assert run_cli("keys", "init", env={"PORTALQ_KEY_FILE": str(good)}).returncode == 0
    good.chmod(0o644)
    one_line(ein({"PORTALQ_KEY_FILE": str(good)}), "keys.json", "readable by others",
             "chmod 600")
    assert jobs_in(dsn) == 0
    assert stat.S_IMODE(good.stat().st_mode) == 0o644     # refused, not silently changed


def test_a_setting_file_others_may_read_is_refused(db, dsn, tmp_path: Path):
    """``PORTALQ_SECRETS_DIR`` holds secrets as files (``portalq_smtp_url`` with its
    password): one readable by others is refused at ``portalq run`` start."""
    folder = tmp_path / "secrets"
    folder.mkdir(mode=0o700)
    secret = folder / "portalq_smtp_url"
    secret.write_text("smtp://user:pass@127.0.0.1:25")
    secret.chmod(0o644)
    out = run_cli("run", env={"PORTALQ_SECRETS_DIR": str(folder)}, timeout=30)
    one_line(out, "portalq_smtp_url", "readable by others")


def test_a_huge_max_payload_bytes_is_one_line(db, dsn, tmp_path: Path):
    payload = tmp_path / "p.json"
    payload.write_text(json.dumps(payloads.NAME_SEARCH))
    for value in ("1" + "0" * 30, "9" * 5000):
        for source in (("--payload", payload.read_text()), ("--payload-file", str(payload))):
            out = run_cli("enqueue", "name_search", "--order", "O", *source,
                          env={"PORTALQ_MAX_PAYLOAD_BYTES": value})
            one_line(out, "PORTALQ_MAX_PAYLOAD_BYTES")
    assert jobs_in(dsn) == 0


def test_accounts_check_against_an_unreachable_portal_is_one_line(db, dsn):
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert run_cli("accounts", "add", "crtc", "main", "--username", "filer").returncode == 0
    env = {"PORTALQ_ACCOUNT_CRTC_MAIN_PASSWORD": "pw", "PORTALQ_STANDIN_URL": "",
           "PORTALQ_PORTAL_URL_CRTC": f"http://127.0.0.1:{port}/crtc"}
    out = run_cli("accounts", "check", "crtc", "main", env=env, timeout=120)
    # as root, the browser's sandbox warning comes first: a log line, not the error
    out.stderr = "".join(line for line in out.stderr.splitlines(keepends=True)
                         if "WITHOUT its sandbox" not in line)
    one_line(out, "crtc/main", "could not sign in")


def test_control_characters_in_user_names_and_notes_are_refused(db, dsn):
    out = run_cli("accounts", "add", "crtc", "evil", "--username", "a\x1b[2Jb")
    one_line(out, "user name")
    out = run_cli("accounts", "add", "crtc", "evil", "--username", "ok",
                  "--reason", "why\x1b]0;owned\x07")
    one_line(out, "reason")
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM portalq.portal_accounts").fetchone()[0] == 0
    job = run_cli("enqueue", "name_search", "--order", "O", "--payload",
                  json.dumps(payloads.NAME_SEARCH))
    job_id = job.stdout.strip()
    for verb in ("approve", "reject"):
        out = run_cli("jobs", verb, job_id, "--note", "fine\x1b[31m")
        one_line(out, "note")
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM portalq.audit_log WHERE reason LIKE %s",
                         ("%\x1b%",)).fetchone()[0] == 0


def test_a_malformed_smtp_url_is_caught_at_run_start(db, dsn):
    out = run_cli("run", env={"PORTALQ_SMTP_URL": "smtp://user:p@ss#word@host:25"},
                  timeout=30)
    one_line(out, "PORTALQ_SMTP_URL")
    assert "p@ss" not in out.stderr                    # never the password


def test_patching_a_secret_with_the_marker_text_says_so(db, dsn):
    out = run_cli("enqueue", "obtain_ein", "--order", "ORD-M", "--payload",
                  json.dumps(payloads.OBTAIN_EIN))
    job_id = out.stdout.strip()
    assert run_cli("jobs", "cancel", job_id).returncode == 0
    patch = {"responsible_party": {"ssn": "[encrypted]"}}
    out = run_cli("jobs", "retry", job_id, "--payload-patch", json.dumps(patch))
    one_line(out, "responsible_party.ssn", "[encrypted]", "the value itself")
    assert "was erased" not in out.stderr
    shown = json.loads(run_cli("jobs", "show", job_id, "--json").stdout)
    assert shown["status"] == "cancelled"


def test_control_characters_stored_before_are_escaped_on_print(db, dsn):
    """Rows written before input was checked (or by SQL) print escaped, never raw: an
    escape sequence in a user name or reason would be replayed by the terminal."""
    with psycopg.connect(dsn) as c:
        c.execute("INSERT INTO portalq.portal_accounts (portal, name, username, created_at) "
                  "VALUES ('crtc', 'old', %s, now())", ("a\x1b[2Jb",))
        c.execute("INSERT INTO portalq.audit_log (at, actor, role, source, action, target, reason) "
                  "VALUES (now(), 'x', 'admin', 'cli', 'job.reject', 'job:1', %s)",
                  ("why\x1b]0;owned\x07\nsecond line",))
    for args in (("accounts", "list"), ("audit",)):
        out = run_cli(*args)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout, out.stdout
    assert "a\\x1b[2Jb" in run_cli("accounts", "list").stdout
    assert "why\\x1b]0;owned\\x07\\nsecond line" in run_cli("audit").stdout

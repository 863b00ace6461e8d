"""Every class of bad input through the real CLI (issue 13): one line ``portalq: error: ...``
on stderr, no traceback, the documented exit code (2 input, 3 illegal state, 4 database
unavailable), and nothing written."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator

import psycopg
import pytest

from tests import payloads
from tests.conftest import run_cli

SSN = payloads.OBTAIN_EIN["responsible_party"]["ssn"]


def jobs_in(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0]


def one_line_error(out: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("portalq: error: "), out.stderr
    for needle in needles:
        assert needle in out.stderr, out.stderr
    return out.stderr


def enqueue(*extra: str, payload: object = None, job_type: str = "name_search",
            order: str = "ORD-1", **kw: object) -> subprocess.CompletedProcess[str]:
    body = payloads.ALL[job_type] if payload is None else payload
    return run_cli("enqueue", job_type, "--order", order, "--payload", json.dumps(body),
                   *extra, **kw)  # type: ignore[arg-type]


def with_value(base: dict, path: str, value: object) -> dict:
    out = json.loads(json.dumps(base))
    node = out
    *parents, leaf = path.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    return out


# -- control characters ------------------------------------------------------------------
def test_nul_in_a_payload_string_never_reaches_postgres_nor_echoes_the_ssn(db, dsn):
    bad = with_value(payloads.OBTAIN_EIN, "responsible_party.ssn", SSN + "\0")
    err = one_line_error(enqueue(payload=bad, job_type="obtain_ein"), 2,
                         "payload.responsible_party.ssn must not contain a NUL character")
    assert SSN not in err
    bad = with_value(payloads.OBTAIN_EIN, "legal_name", "Widgets\0 LLC")
    err = one_line_error(enqueue(payload=bad, job_type="obtain_ein"), 2, "payload.legal_name")
    assert SSN not in err
    bad = with_value(payloads.NAME_SEARCH, "applicant.name", "Ada\x07")
    one_line_error(enqueue(payload=bad), 2, "control character (U+0007)")
    assert jobs_in(dsn) == 0


def test_a_letter_may_keep_its_line_breaks(db, dsn):
    ok = with_value(payloads.PROCESS_CRTC, "letter_text", "Dear CRTC,\n\tWe register.\r\n")
    assert enqueue(payload=ok, job_type="process_crtc").returncode == 0
    assert jobs_in(dsn) == 1


def test_control_characters_in_order_id_and_idempotency_key(db, dsn, tmp_path):
    one_line_error(enqueue(order="ORD-1\nSubject: spoofed"), 2,
                   "order id must not contain a control character (U+000A)")
    one_line_error(enqueue("--idempotency-key", "k\t1"), 2, "idempotency key must not contain")
    batch = tmp_path / "b.jsonl"
    for field in ("order", "idempotency_key"):
        line = {"job_type": "name_search", "order": "ORD-1", "payload": payloads.NAME_SEARCH}
        line[field] = "A\u0000B"
        batch.write_text(json.dumps(line) + "\n")
        one_line_error(run_cli("enqueue-batch", str(batch)), 2, f"{batch}:1:",
                       "must not contain a NUL character")
    assert jobs_in(dsn) == 0


# -- run_at --------------------------------------------------------------------------------
@pytest.mark.parametrize("run_at, message", [
    ("9999-12-31T23:00-05:00", "out of range (years 1..9999 in UTC)"),
    ("0001-01-01T00:00+01:00", "out of range (years 1..9999 in UTC)"),
    ("1999-12-31T23:59:59Z", "is out of range (2000-01-01 .. ten years from now"),
    ("2999-01-01T00:00:00Z", "is out of range (2000-01-01 .. ten years from now"),
])
def test_run_at_out_of_range(db, dsn, run_at, message):
    one_line_error(enqueue("--run-at", run_at), 2, message)
    assert jobs_in(dsn) == 0


# -- files -----------------------------------------------------------------------------
def test_binary_and_endless_payload_files(db, dsn, tmp_path):
    binary = tmp_path / "payload.bin"
    binary.write_bytes(b'{"names": ["\xff\xfe"]}')
    one_line_error(run_cli("enqueue", "name_search", "--order", "O", "--payload-file",
                           str(binary)), 2, "is not UTF-8 text")
    started = time.monotonic()
    one_line_error(run_cli("enqueue", "name_search", "--order", "O", "--payload-file",
                           "/dev/zero"), 2, "larger than 262144 bytes")
    assert time.monotonic() - started < 30  # read with a bound, not until MemoryError
    assert jobs_in(dsn) == 0


def test_binary_and_endless_batch_files(db, dsn, tmp_path):
    binary = tmp_path / "batch.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    one_line_error(run_cli("enqueue-batch", str(binary)), 2, f"{binary}:1: not UTF-8 text")
    one_line_error(run_cli("enqueue-batch", "/dev/zero"), 2, "/dev/zero:1: line longer than")
    assert jobs_in(dsn) == 0


@pytest.mark.parametrize("field, value, message", [
    ("priority", "high", "priority must be an integer, not a string"),
    ("priority", True, "priority must be an integer, not a boolean"),
    ("max_attempts", 2.5, "max_attempts must be an integer, not a number"),
    ("idempotency_key", 42, "idempotency_key must be a string or null, not an integer"),
    ("order", 1001, "order must be a string, not an integer"),
    ("job_type", ["name_search"], "job_type must be a string, not an array"),
    ("payload", [1], "payload must be an object or null, not an array"),
    ("run_at", 1767225600, "run_at must be a string or null, not an integer"),
    ("portal", {}, "portal must be a string or null, not an object"),
])
def test_batch_fields_of_the_wrong_json_type(db, dsn, tmp_path, field, value, message):
    good = {"job_type": "name_search", "order": "ORD-1", "payload": payloads.NAME_SEARCH}
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps(good) + "\n" + json.dumps({**good, field: value}) + "\n")
    one_line_error(run_cli("enqueue-batch", str(batch)), 2, f"{batch}:2: {message}")
    assert jobs_in(dsn) == 0


# -- limits --------------------------------------------------------------------------------
def test_over_long_identifiers_are_input_errors_not_outages(db, dsn):
    one_line_error(enqueue(order="O" * 10_000), 2,
                   "order id is 10000 characters long (at most 200)")
    one_line_error(enqueue("--idempotency-key", "k" * 5_000), 2,
                   "idempotency key is 5000 characters long (at most 200)")
    assert enqueue(order="O" * 200).returncode == 0  # the limit itself is fine
    assert jobs_in(dsn) == 1


def test_payload_size_limit_is_configurable(db, dsn, tmp_path):
    big = with_value(payloads.PROCESS_CRTC, "letter_text", "x" * 2_000)
    one_line_error(enqueue(payload=big, job_type="process_crtc",
                           env={"PORTALQ_MAX_PAYLOAD_BYTES": "1000"}), 2,
                   "payload is larger than 1000 bytes (PORTALQ_MAX_PAYLOAD_BYTES)")
    assert enqueue(payload=big, job_type="process_crtc").returncode == 0  # 256 KiB default
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps(with_value(payloads.PROCESS_CRTC, "letter_text", "x" * 300_000)))
    one_line_error(run_cli("enqueue", "process_crtc", "--order", "O", "--payload-file",
                           str(huge)), 2, "larger than 262144 bytes")
    assert jobs_in(dsn) == 1


def test_a_job_type_goes_only_to_its_own_portal(db, dsn):
    one_line_error(enqueue("--portal", "crtc", job_type="obtain_ein"), 2,
                   "obtain_ein jobs go to portal irs_ein, not 'crtc'")
    assert enqueue("--portal", "irs_ein", job_type="obtain_ein").returncode == 0
    assert jobs_in(dsn) == 1


def test_an_idempotency_key_belongs_to_one_job_type(db, dsn, tmp_path):
    batch = tmp_path / "b.jsonl"
    lines = [{"job_type": "name_search", "order": "ORD-1", "payload": payloads.NAME_SEARCH,
              "idempotency_key": "ORD-1/first"},
             {"job_type": "process_crtc", "order": "ORD-1", "payload": payloads.PROCESS_CRTC,
              "idempotency_key": "ORD-1/first"}]
    batch.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    one_line_error(run_cli("enqueue-batch", str(batch)), 2,
                   f"{batch}:2: idempotency key already used on line 1 for a name_search job")
    assert jobs_in(dsn) == 0
    # an existing job of another type: an error too, also when it comes first in a batch
    assert enqueue("--idempotency-key", "ORD-1/first").returncode == 0
    one_line_error(enqueue("--idempotency-key", "ORD-1/first", job_type="process_crtc"), 2,
                   "idempotency key already used by job", "a name_search job, not process_crtc")
    batch.write_text(json.dumps({**lines[1], "idempotency_key": "new"}) + "\n"
                     + json.dumps(lines[1]) + "\n")
    one_line_error(run_cli("enqueue-batch", str(batch)), 2, f"{batch}:2: idempotency key")
    assert jobs_in(dsn) == 1
    # the same type and key is still idempotent
    same = batch.with_name("same.jsonl")
    same.write_text(json.dumps(lines[0]) + "\n" + json.dumps(lines[0]) + "\n")
    out = run_cli("enqueue-batch", str(same))
    assert out.returncode == 0 and "0 job(s) enqueued, 2 already existed" in out.stdout
    assert jobs_in(dsn) == 1


def test_list_limit_must_be_positive(db):
    one_line_error(run_cli("jobs", "list", "--limit", "-1"), 2, "limit must be 1..100000")
    one_line_error(run_cli("jobs", "list", "--order", "a\tb"), 2, "order id must not contain")


@pytest.mark.parametrize("args, message", [
    (["status", "--interval", "-1"], "--interval must be in (0, 3600] seconds"),
    (["standin", "--port", "70000"], "--port must be 0..65535"),
    (["demo", "--timeout", "-5"], "--timeout must be positive"),
    (["enqueue-batch", "/dev/null", "--chunk", "0"], "--chunk must be at least 1"),
])
def test_option_ranges(args, message):
    one_line_error(run_cli(*args), 2, message)


# -- settings ------------------------------------------------------------------------------
@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("env, message", [
    ({"PORTALQ_METRICS_PORT": "70000"}, "PORTALQ_METRICS_PORT: Input should be less than or equal to 65535"),
    ({"PORTALQ_LOG_LEVEL": "bogus"}, "PORTALQ_LOG_LEVEL: must be one of DEBUG, INFO"),
    ({"PORTALQ_CONNECT_TIMEOUT_SECONDS": "-1"}, "PORTALQ_CONNECT_TIMEOUT_SECONDS"),
    # issue 48 #14: only the CRTC's flow stops at a review page; naming another portal or
    # type would let its jobs file without the approval the setting promises
    ({"PORTALQ_APPROVAL": "process_crtc,delaware_icis"},
     "PORTALQ_APPROVAL: delaware_icis has no flow that stops for approval before it "
     "submits (these do: crtc, process_crtc)"),
    ({"PORTALQ_APPROVAL": "obtain_ein"}, "PORTALQ_APPROVAL: obtain_ein has no flow"),
    ({"PORTALQ_APPROVAL": "nonesuch"}, "PORTALQ_APPROVAL: nonesuch has no flow"),
])
def test_service_settings_are_checked_before_the_database(closed_port, env, message):
    # the database is unreachable: a check after the migrations would exit 4 instead
    url = f"postgresql://portalq:s3cret@127.0.0.1:{closed_port}/portalq"
    err = one_line_error(run_cli("run", env={**env, "PORTALQ_DATABASE_URL": url}), 2, message)
    assert "s3cret" not in err


@pytest.mark.parametrize("url", [
    "postgresql://portalq:s3cret@db.invalid:notaport/portalq",
    "postgresql://portalq:s3cret#x@db.invalid/portalq",     # '#' not percent-encoded
    "postgresql://portalq:s3/cret@db.invalid/portalq",      # '/' not percent-encoded
    "postgresql://portalq:s3cret@[::1/portalq",
    "mysql://portalq:s3cret@db.invalid/portalq",
    "postgresql://portalq:s3cret@db.invalid/portalq?bogus_option=1",
])
def test_a_malformed_database_url_never_prints_its_password(url):
    err = one_line_error(run_cli("jobs", "list", env={"PORTALQ_DATABASE_URL": url}), 2,
                         "invalid PORTALQ_DATABASE_URL")
    assert "s3" not in err and "cret" not in err


@pytest.mark.parametrize("args", [("migrate",), ("run",), ("enqueue", "name_search", "--order",
                                                            "O", "--payload",
                                                            json.dumps(payloads.NAME_SEARCH),
                                                            "--database-url")])
def test_every_command_checks_the_url_first(args):
    url = "postgresql://portalq:s3/cret@db.invalid/portalq"
    env = {"PORTALQ_DATABASE_URL": url}
    if args[-1] == "--database-url":
        args, env = (*args, url), {}
    err = one_line_error(run_cli(*args, env=env), 2, "invalid PORTALQ_DATABASE_URL")
    assert "s3" not in err and "cret" not in err


def test_migrate_against_a_closed_port_is_exit_4(closed_port):
    url = f"postgresql://portalq:s3cret@127.0.0.1:{closed_port}/portalq"
    for args in (("migrate",), ("jobs", "list"), ("run",)):
        err = one_line_error(run_cli(*args, env={"PORTALQ_DATABASE_URL": url}), 4,
                             "database unavailable", "Connection refused")
        assert "s3cret" not in err


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield int(s.getsockname()[1])


def test_a_server_that_never_answers_times_out_with_exit_4(silent_server):
    url = f"postgresql://portalq:s3cret@127.0.0.1:{silent_server}/portalq"
    env = {"PORTALQ_DATABASE_URL": url, "PORTALQ_CONNECT_TIMEOUT_SECONDS": "2"}
    for args in (("jobs", "list"), ("migrate",), ("run",)):
        started = time.monotonic()
        out = run_cli(*args, env=env, timeout=60)
        elapsed = time.monotonic() - started
        one_line_error(out, 4, "database unavailable: no answer within the connect timeout")
        assert 2 <= elapsed < 30, elapsed

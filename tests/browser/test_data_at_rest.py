"""No SSN anywhere at rest after real `obtain_ein` runs: not in a dump, the data files, the
WAL, artifacts, logs, mails, CLI outputs or /metrics (issue 15)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import urllib.request
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from portalq.jobs import clock, queue
from tests import payloads
from tests.browser.flowkit import artifact_blobs, secret_forms
from tests.checkpoints import state
from tests.conftest import run_cli
from tests.mailbox import Mailbox
from tests.ports import free_port
from tests.service_helpers import Service, files_under, open_all_hours, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

# SSNs used nowhere else, so a hit can only come from this test's jobs
DONE, FAILS, CANCELLED = "771-23-4589", "772-34-5690", "773-45-6701"


def _ein(ssn: str, name: str) -> dict:
    # the responsible party in person: the only application the IRS answers with the letter
    return {**payloads.OBTAIN_EIN, "legal_name": name, "applicant": "responsible_party",
            "responsible_party": {**payloads.OBTAIN_EIN["responsible_party"], "ssn": ssn}}


def _final(job_id: int) -> bool:
    return queue.get_job(job_id)["status"] in ("completed", "failed", "cancelled")


def _pattern() -> re.Pattern[bytes]:
    forms = {f for ssn in (DONE, FAILS, CANCELLED) for f in secret_forms(ssn)}
    return re.compile(b"|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))


def _hits(pattern: re.Pattern[bytes], where: str, data: bytes) -> list[str]:
    return [f"{where}: {m.group(0)!r}" for m in pattern.finditer(data)]


def test_no_ssn_at_rest_after_completed_failed_and_cancelled_jobs(
        db, dsn, pg_server, tmp_path, standin_server, portals):
    from tests.conftest import ROOT

    open_all_hours(dsn)
    config = tmp_path / "playwright.toml"   # every attempt traced, not only failures
    config.write_text((ROOT / "playwright.config").read_text().replace(
        'policy = "retain-on-failure"', 'policy = "on"'))
    mailbox = Mailbox().start()
    metrics_port = free_port()
    svc = Service(db, tmp_path, "dp", PORTALQ_STANDIN_URL=standin_server.base_url,
                  PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                  PORTALQ_RETRY_BASE_SECONDS=0.2, PORTALQ_WORKERS=2,
                  PORTALQ_METRICS_PORT=metrics_port, PORTALQ_LOG_LEVEL="DEBUG",
                  PORTALQ_LOG_FORMAT="json", PORTALQ_PLAYWRIGHT_CONFIG=config).start()
    outputs: list[tuple[str, str]] = []
    try:
        # fails after the identity step: the IRS refuses the submission (401/103: Form SS-4)
        portals.control("irs_ein", error_code="submit:401/103", error_times=1)
        fails = queue.enqueue("obtain_ein", "ORD-DP2", _ein(FAILS, "Failing Widgets LLC")).id
        wait_until(lambda: _final(fails), 90, "the refused application")
        done = queue.enqueue("obtain_ein", "ORD-DP1", _ein(DONE, "Done Widgets LLC")).id
        cancelled = queue.enqueue("obtain_ein", "ORD-DP3", _ein(CANCELLED, "Later LLC"),
                                  run_at=clock.now() + timedelta(days=3)).id
        out = run_cli("jobs", "cancel", str(cancelled))
        assert out.returncode == 0, out.stderr
        wait_until(lambda: _final(done), 90, "the EIN")
        [mail] = mailbox.wait_for(1, 30)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                    timeout=5) as r:
            outputs.append(("/metrics", r.read().decode()))
    finally:
        svc.stop()
        mailbox.stop()
    rows = {j: queue.get_job(j) for j in (done, fails, cancelled)}
    assert [rows[j]["status"] for j in (done, fails, cancelled)] == [
        "completed", "failed", "cancelled"], {j: r["last_error"] for j, r in rows.items()}
    assert state(rows[fails]["checkpoint"], "ein_application") == "refused"  # past identity
    assert "business: obtain_ein" in mail["Subject"]
    body = next(p for p in mail.walk() if p.get_content_type() == "text/plain")
    assert "erased 30 days after the failure" in body.get_payload(decode=True).decode()
    # erasure: at once for the completed and the cancelled job; kept sealed for a retry
    assert rows[done]["secret_data"] is None and rows[done]["secrets_erased_at"] is not None
    assert rows[cancelled]["secret_data"] is None
    assert rows[fails]["secret_data"] is not None
    assert rows[done]["checkpoint"]["documents"] == ["CP575A.pdf"]  # the letter, stored sealed
    # a retry of the cancelled job asks for the erased SSN again, in one line
    out = run_cli("jobs", "retry", str(cancelled))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "responsible_party.ssn was erased" in out.stderr and "--payload-patch" in out.stderr

    for job_id in (done, fails, cancelled):
        for args in (("jobs", "show", str(job_id)), ("jobs", "show", str(job_id), "--json")):
            out = run_cli(*args)
            assert out.returncode == 0, out.stderr
            outputs.append((" ".join(args), out.stdout + out.stderr))
    shown = json.loads(run_cli("jobs", "show", str(done), "--json").stdout)
    assert shown["payload"]["responsible_party"]["ssn"] == "[erased]"
    shown = json.loads(run_cli("jobs", "show", str(fails), "--json").stdout)
    assert shown["payload"]["responsible_party"]["ssn"] == "[encrypted]"
    for args in (("jobs", "list", "--json"), ("jobs", "list"), ("status", "--json")):
        out = run_cli(*args)
        assert out.returncode == 0, out.stderr
        outputs.append((" ".join(args), out.stdout + out.stderr))

    pattern = _pattern()
    hits: list[str] = []
    for where, text in outputs:
        hits += _hits(pattern, where, text.encode())
    for msg in mailbox.messages:
        hits += _hits(pattern, "mail", msg.as_bytes())
    # artifacts (traces unzipped: every member) and the service's JSON log
    checked = 0
    for where, data in artifact_blobs(tmp_path):
        checked += 1
        hits += _hits(pattern, where, data)
    assert checked > 10 and any(p.suffix == ".zip" for p in tmp_path.rglob("*"))
    assert (tmp_path / "dp.log").stat().st_size > 1000
    # the service wrote its evidence owner-only (umask 077), whatever this process's umask
    artifacts = tmp_path / "artifacts"
    for path in [artifacts, *artifacts.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    # the database: a dump, then every file of the data directory (WAL included) after
    # a CHECKPOINT, the server's own log among them
    pg = pg_server.embedded
    dump = subprocess.run([str(Path(pg._bin("pg_dump"))), "--dbname", dsn],
                          capture_output=True, check=True,
                          env={**os.environ, "PGPASSFILE": str(pg.passfile)}).stdout
    assert b"COPY portalq.job_queue" in dump
    hits += _hits(pattern, "pg_dump", dump)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CHECKPOINT")
    files = [p for p, _ in files_under(pg.pgdata)]   # tests beside drop their databases
    assert any("pg_wal" in p.parts for p in files)
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:   # a file removed meanwhile (temporary files)
            continue
        hits += _hits(pattern, str(path), data)
    assert hits == []

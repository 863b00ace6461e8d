"""Portal accounts through the real service (issue 16): a wrong password never locks the
business out, TOTP needs nobody, an e-mailed code is answered with ``portalq jobs answer``
from another process while the flow waits, an unanswered code refunds the attempt."""

from __future__ import annotations

import json
import re

import psycopg
import pyotp
import pytest
from bckit import CRTC, CRTC_PAYLOAD, build

from portalq.jobs import queue
from tests.conftest import run_cli
from tests.mailbox import Mailbox
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

USER, PASSWORD, WRONG = "acme-filings", "Correct-Horse-42!", "Wrong-Horse-41!"
SEED = pyotp.random_base32()
EMAIL = "filings@acme.example.test"


def _enable(portals, mailbox, **account):
    portals.control(CRTC, signin={"enabled": True, "smtp": mailbox.url,
                                  "accounts": {USER: {"password": PASSWORD, **account}}})


def _account(password, **extra):
    out = run_cli("accounts", "add", CRTC, "ops", "--username", USER)
    assert out.returncode == 0, out.stderr
    return {"PORTALQ_ACCOUNT_CRTC_OPS_PASSWORD": password,
            **{f"PORTALQ_ACCOUNT_CRTC_OPS_{k.upper()}": v for k, v in extra.items()}}


def _service(db, tmp_path, standin_server, mailbox, **env):
    return Service(db, tmp_path, "acct", PORTALQ_STANDIN_URL=standin_server.base_url,
                   PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                   PORTALQ_RETRY_BASE_SECONDS=0.2, **env)


def _signins(portals):
    return portals._call(f"/_ledger/{CRTC}/signins")


def _status(job_id):
    return queue.get_job(job_id)["status"]


def test_a_wrong_password_is_tried_once_pauses_the_account_and_mails_once(
        db, dsn, tmp_path, standin_server, portals):
    import os

    open_all_hours(dsn)
    mailbox = Mailbox().start()
    _enable(portals, mailbox)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    secret = secrets / "account_crtc_ops_password"
    secret.write_text(WRONG)
    os.chmod(secret, 0o600)
    assert run_cli("accounts", "add", CRTC, "ops", "--username", USER).returncode == 0
    jobs = [queue.enqueue("process_crtc", f"ORD-{i}", build(CRTC_PAYLOAD)).id for i in range(3)]
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_WORKERS=1,
                   PORTALQ_SECRETS_DIR=str(secrets)).start()
    try:
        wait_until(lambda: _status(jobs[0]) == "failed" and all(
            _status(j) == "deferred" for j in jobs[1:]), 90, "one failure, the others waiting")
        [mail] = mailbox.wait_for(1, 30)
        with psycopg.connect(dsn) as c:
            wait_until(lambda: c.execute("SELECT count(*) FROM portalq.escalations WHERE sent_at IS "
                                         "NULL").fetchone()[0] == 0, 30, "the outbox")
            escalations = c.execute("SELECT job_id, kind FROM portalq.escalations").fetchall()
        attempts = [a for a in _signins(portals)["attempts"] if a["step"] == "password"]
        assert [a["outcome"] for a in attempts] == ["wrong_password"]   # typed exactly once
        failed = queue.get_job(jobs[0])
        assert failed["attempts"] == 1 and "refused" in failed["last_error"]
        assert escalations == [(jobs[0], "business")] and len(mailbox.messages) == 1
        assert WRONG not in mail.as_string() and PASSWORD not in mail.as_string()
        for j in jobs[1:]:   # waiting, no attempt spent
            row = queue.get_job(j)
            assert (row["status"], row["attempts"]) == ("deferred", 0)
        [acct] = json.loads(run_cli("accounts", "list", "--json").stdout)
        assert acct["paused_by"] == "portal" and acct["paused_at"]
        assert portals.ledger(CRTC) == []   # nothing filed

        # a person fixes the secret and resumes the account: the waiting jobs run at once
        secret.write_text(PASSWORD)
        out = run_cli("accounts", "resume", CRTC, "ops", "--reason", "password fixed")
        assert out.returncode == 0, out.stderr
        wait_until(lambda: all(_status(j) == "completed" for j in jobs[1:]), 90,
                   "the waiting jobs, after the resume")
    finally:
        svc.stop()
        mailbox.stop()
    assert len(portals.ledger(CRTC)) == 2                     # each filed once
    assert [queue.get_job(j)["attempts"] for j in jobs[1:]] == [1, 1]
    assert WRONG not in svc.log() and PASSWORD not in svc.log()


def test_totp_signs_in_with_no_human(db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    _enable(portals, mailbox, totp_seed=SEED, mfa="totp")
    env = _account(PASSWORD, totp_seed=SEED)
    job = queue.enqueue("process_crtc", "ORD-T", build(CRTC_PAYLOAD)).id
    svc = _service(db, tmp_path, standin_server, mailbox, **env).start()
    try:
        wait_until(lambda: _status(job) in ("completed", "failed"), 90, "the filing")
    finally:
        svc.stop()
        mailbox.stop()
    row = queue.get_job(job)
    assert row["status"] == "completed", row["last_error"]
    steps = [(a["step"], a["outcome"]) for a in _signins(portals)["attempts"]]
    assert steps == [("password", "accepted"), ("mfa", "accepted")]
    assert len(portals.ledger(CRTC)) == 1
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM portalq.job_questions").fetchone()[0] == 0


def test_an_emailed_code_is_answered_from_another_process_while_the_flow_waits(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    _enable(portals, mailbox, email=EMAIL, mfa="email")
    env = _account(PASSWORD)
    job = queue.enqueue("process_crtc", "ORD-E", build(CRTC_PAYLOAD)).id
    svc = _service(db, tmp_path, standin_server, mailbox, **env).start()
    try:
        def code_mail():
            return next((m for m in mailbox.messages if EMAIL in (m["To"] or "")), None)
        mail = wait_until(code_mail, 90, "the e-mailed code")
        code = re.search(r"\b(\d{6})\b", mail.get_payload()).group(1)
        wait_until(lambda: queue.get_job(job)["checkpoint"].get("step", "").startswith(
            "waiting for a person"), 30, "the job waiting visibly")
        out = run_cli("jobs", "answer", str(job), "--code", code)
        assert out.returncode == 0, out.stderr
        wait_until(lambda: _status(job) in ("completed", "failed"), 90, "the filing")
        admin = [m for m in mailbox.messages if m["To"] == "ops@example.com"]
    finally:
        svc.stop()
        mailbox.stop()
    row = queue.get_job(job)
    assert row["status"] == "completed", row["last_error"]
    assert len(portals.ledger(CRTC)) == 1                 # filed once
    assert any("question" in m["Subject"] for m in admin)  # admins were told at once
    with psycopg.connect(dsn) as c:
        [(answer, read_at)] = c.execute("SELECT answer, read_at FROM portalq.job_questions").fetchall()
        audit = c.execute("SELECT reason FROM portalq.audit_log WHERE action = 'job.answer'"
                          ).fetchall()
    assert answer is None and read_at is not None          # erased once read
    assert code not in json.dumps([list(a) for a in audit])


def test_an_unanswered_code_refunds_the_attempt(db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    _enable(portals, mailbox, email=EMAIL, mfa="email")
    env = _account(PASSWORD)
    job = queue.enqueue("process_crtc", "ORD-N", build(CRTC_PAYLOAD)).id
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_QUESTION_DEADLINE_SECONDS=2,
                   **env).start()
    try:
        wait_until(lambda: _status(job) == "deferred", 90, "the deadline")
    finally:
        svc.stop()
        mailbox.stop()
    row = queue.get_job(job)
    assert row["attempts"] == 0 and "no answer" in row["last_error"]
    assert portals.ledger(CRTC) == []


def test_one_session_per_account_across_two_nodes(db, dsn, tmp_path, standin_server, portals):
    """The portal allows one live session per account (a second sign-in ends the first):
    two nodes with free slots never sign the one account in twice at once -- the second job
    waits for the account, spending no attempt, instead of killing the first's session."""
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    portals.control(CRTC, signin={"enabled": True, "single_session": True,
                                  "accounts": {USER: {"password": PASSWORD}}})
    env = _account(PASSWORD)
    portals.control(CRTC, slow_ms=300)          # each flow holds its session a while
    jobs = [queue.enqueue("process_crtc", f"ORD-{i}", build(CRTC_PAYLOAD)).id for i in range(2)]
    nodes = [Service(db, tmp_path, name, PORTALQ_STANDIN_URL=standin_server.base_url,
                     PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                     PORTALQ_WORKERS=2, **env) for name in ("a", "b")]
    try:
        for n in nodes:
            n.start()
        wait_until(lambda: all(_status(j) in ("completed", "failed") for j in jobs), 120,
                   "both filings")
    finally:
        for n in nodes:
            n.stop()
        mailbox.stop()
    rows = [queue.show_job(j) for j in jobs]
    assert [r["status"] for r in rows] == ["completed", "completed"], [
        r["last_error"] for r in rows]
    assert [r["attempts"] for r in rows] == [1, 1]       # no session was cut short
    assert len(portals.ledger(CRTC)) == 2
    waited = [e for r in rows for e in r["events"]
              if (e.get("error") or "").startswith("every account of crtc is in use")]
    assert waited, "the second job waited for the account"


def test_accounts_check_signs_in_once_and_says_what_it_found(db, dsn, standin_server,
                                                            portals):
    portals.control(CRTC, signin={"enabled": True, "password_expires_in": 5,
                                  "accounts": {USER: {"password": PASSWORD}}})
    assert run_cli("accounts", "add", CRTC, "ops", "--username", USER).returncode == 0
    env = {"PORTALQ_STANDIN_URL": standin_server.base_url}
    good = run_cli("accounts", "check", CRTC, "ops",
                   env={**env, "PORTALQ_ACCOUNT_CRTC_OPS_PASSWORD": PASSWORD}, timeout=120)
    assert good.returncode == 0, good.stderr
    assert good.stdout.strip() == (f"crtc/ops: signed in as {USER}; the password expires "
                                   "in 5 days")
    bad = run_cli("accounts", "check", CRTC, "ops",
                  env={**env, "PORTALQ_ACCOUNT_CRTC_OPS_PASSWORD": WRONG}, timeout=120)
    # (as root, Chromium's no-sandbox notice comes first)
    last = bad.stderr.strip().splitlines()[-1]
    assert bad.returncode == 3 and last == (f"portalq: error: account '{USER}' on crtc: user "
                                            "name or password refused")
    assert WRONG not in bad.stderr
    outcomes = [a["outcome"] for a in _signins(portals)["attempts"] if a["step"] == "password"]
    assert outcomes == ["accepted", "wrong_password"]     # one sign-in each


def test_jobs_on_one_account_sign_in_once(db, dsn, tmp_path, standin_server, portals):
    """The session is reused between jobs (kept sealed at rest): the password is typed once
    for four filings; a session the portal let expire is dropped and signed in anew."""
    from datetime import UTC, datetime, timedelta

    from portalq.jobs import clock
    from portalq.jobs.secrets import crypto

    open_all_hours(dsn)
    mailbox = Mailbox().start()
    portals.control(CRTC, signin={"enabled": True, "idle_minutes": 30,
                                  "accounts": {USER: {"password": PASSWORD}}})
    env = _account(PASSWORD)
    jobs = [queue.enqueue("process_crtc", f"ORD-{i}", build(CRTC_PAYLOAD)).id
            for i in range(4)]
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_WORKERS=1, **env).start()
    try:
        wait_until(lambda: all(_status(j) == "completed" for j in jobs), 180, "four filings")
        with psycopg.connect(dsn) as c:
            [(state,)] = c.execute("SELECT session_state FROM portalq.portal_accounts").fetchall()
        assert crypto.is_sealed_blob(bytes(state)) and b"cookies" not in bytes(state)
        passwords = [a for a in _signins(portals)["attempts"] if a["step"] == "password"]
        assert [a["outcome"] for a in passwords] == ["accepted"]   # typed once
        # an hour later (the stand-in's clock: this process's) the portal has let the
        # session expire: the next job drops it and signs in again, once
        clock.set_clock(clock.FrozenClock(datetime.now(UTC) + timedelta(hours=1)))
        more = queue.enqueue("process_crtc", "ORD-4", build(CRTC_PAYLOAD),
                             run_at=datetime.now(UTC)).id
        wait_until(lambda: _status(more) in ("completed", "failed"), 90, "the fifth filing")
    finally:
        clock.set_clock(None)
        svc.stop()
        mailbox.stop()
    passwords = [a for a in _signins(portals)["attempts"] if a["step"] == "password"]
    assert [a["outcome"] for a in passwords] == ["accepted", "accepted"]
    row = queue.get_job(more)
    assert (row["status"], row["attempts"]) == ("completed", 1), row["last_error"]
    assert len(portals.ledger(CRTC)) == 5
    assert PASSWORD not in svc.log()


# --- approval before the point of no return ----------------------------------------------

def _approval(job_id):
    return (queue.get_job(job_id)["checkpoint"] or {}).get("approval") or {}


def _waiting_for_approval(job_id):
    return _status(job_id) == "deferred" and _approval(job_id).get("state") == "pending"


def test_approve_files_once_and_reject_files_nothing(db, dsn, tmp_path, standin_server,
                                                     portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    a = queue.enqueue("process_crtc", "ORD-A", build(CRTC_PAYLOAD)).id
    b = queue.enqueue("process_crtc", "ORD-B", build(CRTC_PAYLOAD)).id
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_APPROVAL="process_crtc").start()
    try:
        wait_until(lambda: _waiting_for_approval(a) and _waiting_for_approval(b), 90,
                   "both at their review page")
        assert portals.ledger(CRTC) == []                  # nothing submitted yet
        assert queue.get_job(a)["attempts"] == 0           # the wait spent no attempt
        assert queue.get_job(a)["checkpoint"]["step"] == "waiting for approval"
        shots = [x["path"] for x in queue.show_job(a)["artifacts"]]
        assert any("review-for-approval" in s for s in shots), shots
        out = run_cli("jobs", "approve", str(a))
        assert out.returncode == 0, out.stderr
        out = run_cli("jobs", "reject", str(b), "--note", "not this company")
        assert out.returncode == 0, out.stderr
        wait_until(lambda: _status(a) == "completed", 90, "the approved filing")
        mails = mailbox.wait_for(2, 30)
    finally:
        svc.stop()
        mailbox.stop()
    assert _status(b) == "cancelled"
    assert [e["company_name"] for e in portals.ledger(CRTC)] == [CRTC_PAYLOAD["company_name"]]
    assert sum("approval" in str(m["Subject"]) for m in mails) == 2   # admins were asked
    again = run_cli("jobs", "approve", str(b))
    assert again.returncode == 3 and "not waiting for approval" in again.stderr


def test_changed_data_after_approval_asks_again(db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    job = queue.enqueue("process_crtc", "ORD-C", build(CRTC_PAYLOAD)).id
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_APPROVAL="crtc").start()
    try:
        wait_until(lambda: _waiting_for_approval(job), 90, "the review page")
        with psycopg.connect(dsn, autocommit=True) as c:   # the order changed meanwhile
            c.execute("UPDATE portalq.job_queue SET payload = jsonb_set(payload, '{company_name}', "
                      "'\"Other Telecom Inc.\"') WHERE id = %s", (job,))
        assert run_cli("jobs", "approve", str(job)).returncode == 0
        wait_until(lambda: _waiting_for_approval(job) and _approval(job).get("changed"), 90,
                   "the flow asking again: the review page no longer matches")
        assert portals.ledger(CRTC) == []
        assert run_cli("jobs", "approve", str(job)).returncode == 0
        wait_until(lambda: _status(job) == "completed", 90, "the filing")
    finally:
        svc.stop()
        mailbox.stop()
    assert [e["company_name"] for e in portals.ledger(CRTC)] == ["Other Telecom Inc."]


#: pages a signed-in session lasts: one filing and a bit, so the next job's reused session
#: runs out in the middle of its flow
PAGES_PER_SESSION = 10   # two of them GCKey's page back to the service and its Continue


def test_a_session_expiring_mid_flow_signs_in_again_without_filing_twice(
        db, dsn, tmp_path, standin_server, portals):
    """The portal ends a session after a few pages: the second job reuses the first's session,
    which runs out in the middle of its flow; the flow signs in again within the same
    attempt and files once."""
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    portals.control(CRTC, signin={"enabled": True, "session_pages": PAGES_PER_SESSION,
                                  "accounts": {USER: {"password": PASSWORD}}})
    env = _account(PASSWORD)
    jobs = [queue.enqueue("process_crtc", f"ORD-S{i}", build(CRTC_PAYLOAD)).id
            for i in range(2)]
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_WORKERS=1, **env).start()
    try:
        wait_until(lambda: all(_status(j) in ("completed", "failed") for j in jobs), 120,
                   "both filings")
    finally:
        svc.stop()
        mailbox.stop()
    rows = [queue.show_job(j) for j in jobs]
    assert [(r["status"], r["attempts"]) for r in rows] == [("completed", 1)] * 2, [
        r["last_error"] for r in rows]
    passwords = [a["outcome"] for a in _signins(portals)["attempts"] if a["step"] == "password"]
    assert passwords == ["accepted", "accepted"]        # the second job signed in again
    assert len(portals.ledger(CRTC)) == 2                # each filed once
    assert f"job {jobs[1]}: portal session lost" in svc.log()   # mid-flow, not at the start
    assert f"job {jobs[0]}: portal session lost" not in svc.log()


def test_no_password_seed_or_session_in_a_dump_logs_traces_screenshots_or_mails(
        db, dsn, pg_server, tmp_path, standin_server, portals):
    """After filings that signed in (password + TOTP, sessions kept for reuse), every place
    portalq writes is searched for the password, the TOTP seed and the session cookies."""
    import os
    import subprocess
    from pathlib import Path

    from tests.browser.flowkit import artifact_blobs
    from tests.conftest import ROOT

    open_all_hours(dsn)
    config = tmp_path / "playwright.toml"   # every attempt traced, not only failures
    config.write_text((ROOT / "playwright.config").read_text().replace(
        'policy = "retain-on-failure"', 'policy = "on"'))
    mailbox = Mailbox().start()
    _enable(portals, mailbox, totp_seed=SEED, mfa="totp")
    env = _account(PASSWORD, totp_seed=SEED)
    jobs = [queue.enqueue("process_crtc", f"ORD-X{i}", build(CRTC_PAYLOAD)).id for i in range(2)]
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_WORKERS=1,
                   PORTALQ_LOG_LEVEL="DEBUG", PORTALQ_LOG_FORMAT="json",
                   PORTALQ_PLAYWRIGHT_CONFIG=config,
                   # the third's lost answer waits on the CRTC; a short window sends it to
                   # a person (and a mail) within the test
                   PORTALQ_PORTAL_CHECK_SECONDS="1", PORTALQ_LOST_ANSWER_WINDOW_SECONDS="2",
                   **env).start()
    try:
        wait_until(lambda: all(_status(j) == "completed" for j in jobs), 120, "the filings")
        # a failing third: its escalation mail is searched too
        portals.control(CRTC, error_code="500", error_times=-1)
        third = queue.enqueue("process_crtc", "ORD-X3", build(CRTC_PAYLOAD),
                              max_attempts=1).id
        wait_until(lambda: _status(third) == "failed", 90, "the failure")
        mailbox.wait_for(1, 30)
    finally:
        portals.control(CRTC, error_code=None, error_times=0)
        svc.stop()
        mailbox.stop()
    sessions = list(portals.server.state[CRTC].accounts.sessions)   # the cookies' values
    secrets = [PASSWORD.encode(), SEED.encode(), *(s.encode() for s in sessions)]
    assert len(secrets) > 2
    pg = pg_server.embedded
    dump = subprocess.run([str(Path(pg._bin("pg_dump"))), "--dbname", dsn],
                          capture_output=True, check=True,
                          env={**os.environ, "PGPASSFILE": str(pg.passfile)}).stdout
    assert b"COPY portalq.portal_accounts" in dump
    places = [("pg_dump", dump), ("service log", (tmp_path / "acct.log").read_bytes())]
    places += [(f"mail {m['Subject']}", m.as_bytes()) for m in mailbox.messages]
    places += list(artifact_blobs(tmp_path / "artifacts"))
    listed = run_cli("accounts", "list", "--json", env=env)
    places.append(("accounts list", listed.stdout.encode()))
    assert any(".zip" in where for where, _ in places)       # traces were searched
    assert any(".png" in where for where, _ in places)       # and screenshots
    hits = [f"{where}: {s[:6]!r}..." for where, data in places for s in secrets if s in data]
    assert hits == []


def test_jobs_spread_over_the_accounts_and_expiry_warnings_reach_the_admins(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    portals.control(CRTC, signin={"enabled": True, "password_expires_in": 6, "accounts": {
        USER: {"password": PASSWORD}, "second-filer": {"password": WRONG}}})
    env = _account(PASSWORD)
    assert run_cli("accounts", "add", CRTC, "two", "--username", "second-filer").returncode == 0
    env["PORTALQ_ACCOUNT_CRTC_TWO_PASSWORD"] = WRONG   # (this account's own password)
    jobs = [queue.enqueue("process_crtc", f"ORD-P{i}", build(CRTC_PAYLOAD)).id for i in range(2)]
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_WORKERS=2, **env).start()
    try:
        wait_until(lambda: all(_status(j) == "completed" for j in jobs), 120, "both filings")
        mails = mailbox.wait_for(1, 30)
    finally:
        svc.stop()
        mailbox.stop()
    per_account = {u: a["attempts"] for u, a in _signins(portals)["accounts"].items()}
    assert per_account == {USER: 1, "second-filer": 1}      # one job on each, at once
    assert all(queue.get_job(j)["attempts"] == 1 for j in jobs)
    with psycopg.connect(dsn) as c:
        notices = c.execute("SELECT reason FROM portalq.portal_notices WHERE kind = "
                            "'password_expiring'").fetchall()
        expiry = dict(c.execute("SELECT name, password_expires_on FROM portalq.portal_accounts"))
    assert len(notices) == 2 and all(e is not None for e in expiry.values())
    assert any("a password expires" in str(m["Subject"]) for m in mails)
    assert PASSWORD not in " ".join(str(m) for m in mails) and WRONG not in str(mails)

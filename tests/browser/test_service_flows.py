"""The portal flows run by the real service (`portalq run`) against the stand-ins."""

from __future__ import annotations

import re

import psycopg
import pytest

from portalq.jobs import queue
from portalq.jobs.checkpoints import past_point_of_no_return
from tests import payloads
from tests.browser import bckit
from tests.checkpoints import state
from tests.mailbox import Mailbox
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = pytest.mark.browser


def _service(db, tmp_path, standin_server, mailbox, **env):
    env = {"PORTALQ_WORKERS": 3, **env}
    return Service(db, tmp_path, "flows", PORTALQ_STANDIN_URL=standin_server.base_url,
                   PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                   PORTALQ_RETRY_BASE_SECONDS=0.2, **env)


def _documents(dsn, job_id):
    """The job's stored documents, opened (they are sealed at rest)."""
    from portalq.jobs.secrets import crypto

    with psycopg.connect(dsn) as c:
        rows = c.execute("SELECT name, data, key_id FROM portalq.job_documents WHERE job_id = %s",
                         (job_id,)).fetchall()
    assert all(k is not None and not bytes(d).startswith(b"%PDF") for _n, d, k in rows)
    return {n: crypto.open_blob(k, d) for n, d, k in rows}


def _final(job_id):
    return queue.get_job(job_id)["status"] in ("completed", "failed", "cancelled")


def test_every_job_type_end_to_end(db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    svc = _service(db, tmp_path, standin_server, mailbox).start()
    try:
        jobs = {
            "name": queue.enqueue("name_search", "ORD-1", bckit.build(
                bckit.NAME_SEARCH, names=["Cedar Harbour Consulting Ltd."])).id,
            "bc": queue.enqueue("file_entity", "ORD-2", bckit.FILE_ENTITY).id,
            # in person: a designee's application gets its letter by post, none to deliver
                "ein": queue.enqueue("obtain_ein", "ORD-3", {
                    **payloads.OBTAIN_EIN, "applicant": "responsible_party"}).id,
            "crtc": queue.enqueue("process_crtc", "ORD-4", bckit.CRTC_PAYLOAD).id,
        }
        wait_until(lambda: all(_final(j) for j in jobs.values()), 120, "all flows final")
        deliver = queue.enqueue("deliver", "ORD-3", {
            "to": "customer@example.com", "documents": [{"source_job_id": jobs["ein"]}]}).id
        wait_until(lambda: _final(deliver), 60, "delivery")
        [delivered] = [m for m in mailbox.wait_for(1, 10) if m["To"] == "customer@example.com"]
    finally:
        svc.stop()
        mailbox.stop()
    rows = {k: queue.get_job(j) for k, j in jobs.items()}
    assert {k: r["status"] for k, r in rows.items()} == dict.fromkeys(jobs, "completed"), {
        k: r["last_error"] for k, r in rows.items()}
    assert re.fullmatch(r"NR \d{7}", rows["name"]["result"]["nr_number"])
    assert re.fullmatch(r"BC\d{7}", rows["bc"]["result"]["incorporation_number"])
    assert re.fullmatch(r"\d{2}-\d{7}", rows["ein"]["result"]["ein"])
    assert rows["crtc"]["result"]["confirmation"].startswith("CRTC-")
    for key in ("bc", "ein", "crtc"):
        docs = _documents(dsn, jobs[key])
        assert docs and all(d.startswith(b"%PDF-") for d in docs.values()), key
    assert queue.get_job(deliver)["status"] == "completed"
    # every flow reported its steps through ctx.step (the last one stays on the job)
    assert queue.get_job(deliver)["checkpoint"]["step"] == "sending"
    assert all(r["checkpoint"].get("step") for r in rows.values()), {
        k: r["checkpoint"].get("step") for k, r in rows.items()}
    attached = [p for p in delivered.walk() if p.get_filename()]
    assert attached and attached[0].get_payload(decode=True).startswith(b"%PDF-")
    # each filing reached its portal exactly once
    assert len(bckit.entries(portals, "bc_corporate_online", "incorporation")) == 1
    assert len(portals.ledger("irs_ein")) == 1
    assert len(portals.ledger("crtc")) == 1
    # evidence: screenshots per attempt, listed by `jobs show`
    shown = queue.show_job(jobs["ein"])
    assert any(a["kind"] == "screenshot" for a in shown["artifacts"])


@pytest.mark.e2e
def test_rejected_name_patched_by_admin_completes_keeping_checkpoints(
        db, dsn, tmp_path, standin_server, portals):
    from tests.conftest import run_cli

    open_all_hours(dsn)
    mailbox = Mailbox().start()
    svc = _service(db, tmp_path, standin_server, mailbox).start()
    try:
        job = queue.enqueue("file_entity", "ORD-9", bckit.build(
            bckit.FILE_ENTITY, legal_name="Royal Cedar Holdings Ltd.")).id
        wait_until(lambda: _final(job), 60, "the rejection")
        failed = queue.get_job(job)
        assert failed["status"] == "failed" and "REJECTED" in failed["last_error"]
        [escalation] = mailbox.wait_for(1, 30)
        assert "business: file_entity" in escalation["Subject"]
        rejected_nr = failed["checkpoint"]["nr_number"]
        out = run_cli("jobs", "retry", str(job), "--payload-patch",
                      '{"legal_name": "Cedar Harbour Consulting Ltd."}', "--note", "new name")
        assert out.returncode == 0, out.stderr
        wait_until(lambda: _final(job), 60, "the patched filing")
    finally:
        svc.stop()
        mailbox.stop()
    done = queue.show_job(job)
    assert done["status"] == "completed", done["last_error"]
    assert re.fullmatch(r"BC\d{7}", done["result"]["incorporation_number"])
    assert done["checkpoint"]["earlier_nrs"][0]["nr_number"] == rejected_nr
    assert done["checkpoint"]["nr_number"] != rejected_nr
    patch_event = [e for e in done["events"] if (e["detail"] or {}).get("event") == "admin retry"]
    assert patch_event[0]["detail"]["payload_changed"] == ["legal_name"]
    assert patch_event[0]["worker"].startswith("cli:")
    assert len(bckit.entries(portals, "bc_corporate_online", "incorporation")) == 1


def _kill_after_submit(db, dsn, tmp_path, standin_server, portals, mailbox, portal, job_id,
                       **env):
    """Run the job until its portal recorded the submission (the answer hangs), SIGKILL the
    worker there, then let a second node rescue it."""
    import signal

    portals.control(portal, hang_after_submit=True)
    victim = _service(db, tmp_path, standin_server, mailbox, PORTALQ_STALE_AFTER_SECONDS=3).start()
    try:
        wait_until(lambda: len(portals.ledger(portal)) == 1, 60, "the submission")
        assert past_point_of_no_return(queue.get_job(job_id)["checkpoint"])
        victim.signal(signal.SIGKILL)
        victim.wait(10)
    finally:
        victim.stop()
    portals.control(portal, hang_after_submit=False)
    rescuer = Service(db, tmp_path, "rescuer", PORTALQ_STANDIN_URL=standin_server.base_url,
                      PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                      PORTALQ_STALE_AFTER_SECONDS=3, **env)
    return rescuer.start()


@pytest.mark.e2e
def test_a_delaware_filing_asks_a_person_at_its_expected_time_who_confirms_it(
        db, dsn, tmp_path, standin_server, portals):
    """No page known to exist shows what Delaware's staff did (issue 53): the submitted
    filing waits on the portal, then (its expected time, here the first check) a person is
    asked in one mail what to check and where; their --confirmed-filed completes it."""
    from tests.conftest import run_cli

    open_all_hours(dsn)
    mailbox = Mailbox().start()
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_PORTAL_CHECK_SECONDS=1)
    svc.start()
    try:
        job = queue.enqueue("file_entity", "ORD-3", payloads.FILE_ENTITY_DE).id
        wait_until(lambda: _final(job), 60, "the person asked")
        [mail] = mailbox.wait_for(1, 30)
    finally:
        svc.stop()
        mailbox.stop()
    row = queue.show_job(job)
    [entry] = portals.ledger("delaware_icis")
    assert row["status"] == "failed" and "uncertain" in mail["Subject"]
    text = _text_of(mail)
    assert f"service request {entry['service_request']}" in text and "eCorp2" in text
    assert any("waiting on delaware_icis" in (e["error"] or "") for e in row["events"])
    out = run_cli("jobs", "retry", str(job), "--confirmed-filed", "7100037")
    assert out.returncode == 0, out.stderr
    assert queue.get_job(job)["status"] == "completed"
    assert len(portals.ledger("delaware_icis")) == 1


@pytest.mark.e2e
def test_worker_killed_after_submit_delaware_asks_a_person_files_once(
        db, dsn, tmp_path, standin_server, portals):
    """Killed right after the payment click: the rescued job's submission is in doubt and
    no page can look it up, so a person is asked; nothing is filed or paid again."""
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    job = queue.enqueue("file_entity", "ORD-K1", payloads.FILE_ENTITY_DE).id
    rescuer = _kill_after_submit(db, dsn, tmp_path, standin_server, portals, mailbox,
                                 "delaware_icis", job)
    try:
        wait_until(lambda: _final(job), 60, "rescue to a person")
        [mail] = mailbox.wait_for(1, 30)
    finally:
        rescuer.stop()
        mailbox.stop()
    row = queue.show_job(job)
    assert row["status"] == "failed" and "uncertain" in mail["Subject"], row["last_error"]
    assert "may have been taken and paid" in _text_of(mail)
    assert len(portals.ledger("delaware_icis")) == 1  # filed and paid exactly once
    assert any((e["detail"] or {}).get("event") == "rescued" for e in row["events"])


@pytest.mark.e2e
@pytest.mark.parametrize("queued_for", [20, pytest.param(180, marks=pytest.mark.slow)],
                         ids=["20s", "3min"])
@pytest.mark.parametrize("case", ["bc_name_request", "bc_incorporation", "crtc"])
def test_killed_after_submit_while_the_registry_queues_files_and_pays_once(
        db, dsn, tmp_path, standin_server, portals, case, queued_for):
    """SIGKILL right after the submit click while the stand-in keeps the request queued
    (its lookup says "not found", or not decided) for ``queued_for`` seconds (the slow run:
    minutes, many checks): the rescued job waits on the portal -- deferred, no attempt
    spent, checked at the portal's interval -- never submits again, and ends with the
    registry's number once the stand-in decides (a BC Name Request, whose lost creation
    nothing can look up: with a person asked)."""
    portal, job_type, payload, kind = {
        "bc_name_request": ("bc_corporate_online", "name_search", bckit.build(
            bckit.NAME_SEARCH, names=["Cedar Harbour Consulting Ltd."]), "name_request"),
        "bc_incorporation": ("bc_corporate_online", "file_entity", bckit.FILE_ENTITY,
                             "incorporation"),
        "crtc": ("crtc", "process_crtc", bckit.CRTC_PAYLOAD, None)}[case]
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    job = queue.enqueue(job_type, f"ORD-Q-{case}", payload).id
    portals.control(portal, decide_after_seconds=queued_for)
    rescuer = _kill_after_submit(db, dsn, tmp_path, standin_server, portals, mailbox, portal,
                                 job, PORTALQ_PORTAL_CHECK_SECONDS=2)
    try:
        wait_until(lambda: _final(job), queued_for + 100, "the registry's decision")
    finally:
        rescuer.stop()
        mailbox.stop()
    row = queue.show_job(job)
    if case == "bc_name_request":
        # killed right after "Submit Name Request": namex gives the NR its number only in
        # that answer and finds an NR only by its number, so nothing can look it up -- a
        # person is asked; the NR stays unpaid and is never requested again
        assert row["status"] == "failed" and "cannot be looked up" in row["last_error"]
        [entry] = portals.ledger(portal)
        assert entry["payment"] is None
        return
    assert row["status"] == "completed", row["last_error"]
    [entry] = portals.ledger(portal)          # one filing, and with it one payment
    assert kind is None or entry["kind"] == kind
    assert case == "crtc" or entry["payment"]   # (a CRTC registration has no fee)
    number = {"bc_name_request": "nr_number",
              "bc_incorporation": "incorporation_number", "crtc": "confirmation"}[case]
    assert row["result"][number] == entry[number]
    waits = [e for e in row["events"] if "waiting on " in (e["error"] or "")]
    assert waits and all(e["to_status"] == "deferred" for e in waits)
    assert row["attempts"] <= 2   # the waits spent no attempt (the rescue refunds the crash)
    assert row["checkpoint"].get("waiting") is None


@pytest.mark.e2e
def test_worker_killed_after_submit_irs_escalates_then_admin_confirms(
        db, dsn, tmp_path, standin_server, portals):
    from tests.conftest import run_cli

    open_all_hours(dsn)
    mailbox = Mailbox().start()
    job = queue.enqueue("obtain_ein", "ORD-K2", payloads.OBTAIN_EIN).id
    rescuer = _kill_after_submit(db, dsn, tmp_path, standin_server, portals, mailbox,
                                 "irs_ein", job)
    try:
        wait_until(lambda: _final(job), 60, "rescue to a human")
        [mail] = mailbox.wait_for(1, 30)
    finally:
        rescuer.stop()
        mailbox.stop()
    row = queue.get_job(job)
    assert row["status"] == "failed"  # never resubmitted blindly
    assert "uncertain" in mail["Subject"]
    assert "may have accepted" in _text_of(mail)
    [entry] = portals.ledger("irs_ein")
    out = run_cli("jobs", "retry", str(job), "--confirmed-filed", entry["ein"])
    assert out.returncode == 0, out.stderr
    done = queue.get_job(job)
    assert done["status"] == "completed" and done["result"]["confirmation"] == entry["ein"]
    assert len(portals.ledger("irs_ein")) == 1


@pytest.mark.e2e
def test_uncertain_outcome_resolved_not_filed_files_exactly_once(
        db, dsn, tmp_path, standin_server, portals):
    from tests.conftest import run_cli

    open_all_hours(dsn)
    portals.control("irs_ein", drop_before_submit=True)
    mailbox = Mailbox().start()
    svc = _service(db, tmp_path, standin_server, mailbox).start()
    try:
        job = queue.enqueue("obtain_ein", "ORD-U", payloads.OBTAIN_EIN).id
        wait_until(lambda: _final(job), 60, "the uncertain outcome")
        failed = queue.get_job(job)
        assert failed["status"] == "failed"
        assert state(failed["checkpoint"], "ein_application") == "submitting"
        [mail] = mailbox.wait_for(1, 30)
        assert "uncertain" in mail["Subject"]
        assert portals.ledger("irs_ein") == []  # the admin checks the portal: nothing there
        portals.control("irs_ein", drop_before_submit=False)
        out = run_cli("jobs", "retry", str(job), "--not-filed", "--note", "checked the portal")
        assert out.returncode == 0, out.stderr
        wait_until(lambda: _final(job), 60, "the resumed job")
    finally:
        svc.stop()
        mailbox.stop()
    done = queue.show_job(job)
    assert done["status"] == "completed", done["last_error"]
    assert len(portals.ledger("irs_ein")) == 1  # filed exactly once
    assert done["checkpoint"]["resolved"] == "not_filed"
    assert re.fullmatch(r"\d{2}-\d{7}", done["result"]["ein"])


@pytest.mark.e2e
def test_portal_in_maintenance_pauses_then_resumes_with_two_notices(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    portals.control("crtc", maintenance=True)
    mailbox = Mailbox().start()
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_BREAKER_THRESHOLD=3,
                   PORTALQ_BREAKER_PROBE_SECONDS=1).start()
    try:
        ids = [queue.enqueue("process_crtc", f"ORD-M{i}", bckit.build(
            bckit.CRTC_PAYLOAD, company_name=f"Cedar Harbour Telecom {i} Ltd.")).id
            for i in range(5)]
        with psycopg.connect(dsn) as c:
            wait_until(lambda: c.execute("SELECT paused_by FROM portalq.portals WHERE code = 'crtc'"
                                         ).fetchone()[0] == "breaker", 60, "the breaker")
        [paused] = mailbox.wait_for(1, 30)
        assert paused["Subject"] == "[portalq] portal crtc paused"
        # no attempt spent: a job running right now (the breaker's probe, every second)
        # holds its current attempt until the maintenance page refunds it
        rows = [queue.get_job(i) for i in ids]
        assert [r["attempts"] - (r["status"] == "running") for r in rows] == [0] * 5, rows
        portals.control("crtc", maintenance=False)
        wait_until(lambda: all(_final(i) for i in ids), 90, "recovery")
        mails = mailbox.wait_for(2, 30)
    finally:
        svc.stop()
        mailbox.stop()
    assert {queue.get_job(i)["status"] for i in ids} == {"completed"}
    assert [m["Subject"] for m in mails] == ["[portalq] portal crtc paused",
                                             "[portalq] portal crtc resumed"]
    assert len(mailbox.messages) == 2
    assert len(portals.ledger("crtc")) == 5


@pytest.mark.e2e
def test_no_ssn_in_any_artifact_log_email_or_error_of_a_service_run(
        db, dsn, tmp_path, standin_server, portals):
    from tests.browser.flowkit import SSN, assert_no_secret, secret_forms

    open_all_hours(dsn)
    portals.control("irs_ein", error_code="identity:500", error_times=1)  # an outage sign first
    mailbox = Mailbox().start()
    svc = _service(db, tmp_path, standin_server, mailbox,
                   PORTALQ_LOG_LEVEL="DEBUG", PORTALQ_LOG_FORMAT="json").start()
    try:
        ok = queue.enqueue("obtain_ein", "ORD-S1", payloads.OBTAIN_EIN).id
        wait_until(lambda: _final(ok), 90, "the EIN after a retry")
        # the same party again the same day: the one-per-day limit defers it to tomorrow
        again = queue.enqueue("obtain_ein", "ORD-S2", {**payloads.OBTAIN_EIN,
                              "legal_name": "Other Widgets LLC"}).id
        wait_until(lambda: queue.get_job(again)["status"] == "deferred", 60, "rate limit")
        # the IRS refuses the next party at its identity check (401/102: the TIN and name do
        # not match), after the SSN was typed: a business error and its mail
        portals.control("irs_ein", error_code="identity:401/102", error_times=1)
        bad = queue.enqueue("obtain_ein", "ORD-S3", {
            **payloads.OBTAIN_EIN, "responsible_party": {
                **payloads.OBTAIN_EIN["responsible_party"], "ssn": "123-45-6780"}}).id
        wait_until(lambda: _final(bad), 60, "a business error with an escalation")
        mailbox.wait_for(1, 30)
    finally:
        svc.stop()
        mailbox.stop()
    assert queue.get_job(ok)["status"] == "completed" and queue.get_job(ok)["attempts"] == 2
    # screenshots, traces, logs (the service log is in tmp_path too)
    assert assert_no_secret(tmp_path) > 5
    assert assert_no_secret(tmp_path, "123-45-6780") > 5
    forms = secret_forms(SSN) + secret_forms("123-45-6780")
    for msg in mailbox.messages:
        raw = msg.as_bytes()
        assert not any(f in raw for f in forms)
    with psycopg.connect(dsn) as c:
        texts = c.execute("""
            SELECT coalesce(last_error, '') || coalesce(result::text, '') ||
                   coalesce(checkpoint::text, '') || coalesce(rate_key, '') FROM portalq.job_queue
            UNION ALL SELECT coalesce(error, '') || coalesce(detail::text, '') FROM portalq.job_events
            UNION ALL SELECT reason FROM portalq.escalations""").fetchall()
    for (text,) in texts:
        assert not any(f.decode() in text for f in forms), text


@pytest.mark.e2e
def test_the_status_view_shows_each_flows_step(db, dsn, tmp_path, standin_server, portals):
    """``portalq status`` shows, for every built-in browser flow, the step the flow reported
    (here: each waits at its point of no return; deliver's step is checked above)."""
    import json

    from tests.conftest import run_cli

    open_all_hours(dsn)
    for portal in ("bc_corporate_online", "delaware_icis", "irs_ein", "crtc"):
        portals.control(portal, hang_after_submit=True)
    mailbox = Mailbox().start()
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_WORKERS=5).start()
    try:
        jobs = [queue.enqueue("name_search", "ORD-1", bckit.NAME_SEARCH).id,
                queue.enqueue("file_entity", "ORD-2", bckit.FILE_ENTITY).id,
                queue.enqueue("file_entity", "ORD-3", payloads.FILE_ENTITY_DE).id,
                queue.enqueue("obtain_ein", "ORD-4", payloads.OBTAIN_EIN).id,
                queue.enqueue("process_crtc", "ORD-5", bckit.CRTC_PAYLOAD).id]
        wait_until(lambda: sum(len(portals.ledger(p)) for p in (
            "bc_corporate_online", "delaware_icis", "irs_ein", "crtc")) == 5, 90,
            "every flow at its point of no return")
        out = run_cli("status", "--json")
        assert out.returncode == 0, out.stderr
        steps = {r["id"]: r["step"] for r in json.loads(out.stdout)["running"]}
        assert steps == dict.fromkeys(jobs, "submit")
    finally:
        for portal in ("bc_corporate_online", "delaware_icis", "irs_ein", "crtc"):
            portals.control(portal, hang_after_submit=False)
        svc.stop()
        mailbox.stop()


@pytest.mark.e2e
def test_waiting_past_the_expected_time_escalates_once_and_keeps_waiting(
        db, dsn, tmp_path, standin_server, portals):
    """The CRTC keeps a registration queued past the time it is expected by: the service
    mails the admins once ("waiting on crtc since ..., expected by ...") and keeps checking
    it, without failing it or spending its attempts."""
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    portals.control("crtc", decide_after_seconds=60 * 24 * 3600)   # staff take two months
    job = queue.enqueue("process_crtc", "ORD-SLOW", bckit.CRTC_PAYLOAD).id
    svc = _service(db, tmp_path, standin_server, mailbox, PORTALQ_PORTAL_CHECK_SECONDS=1)
    svc.start()
    try:
        wait_until(lambda: (queue.get_job(job)["checkpoint"].get("waiting") or {}).get(
            "checks", 0) >= 1, 60, "the receipt and the first wait")
    finally:
        svc.stop()
    assert mailbox.messages == []   # within the expected time: no mail
    # eleven days later (the CRTC declares ten): the next checks find it still queued
    later = _service(db, tmp_path, standin_server, mailbox, PORTALQ_PORTAL_CHECK_SECONDS=1,
                     PORTALQ_CLOCK_OFFSET_S=11 * 24 * 3600)
    later.start()
    try:
        checks = queue.get_job(job)["checkpoint"]["waiting"]["checks"]
        wait_until(lambda: queue.get_job(job)["checkpoint"]["waiting"]["checks"] >= checks + 3,
                   60, "three more checks")
    finally:
        later.stop()
        mailbox.stop()
    row = queue.show_job(job)
    assert row["status"] == "deferred" and row["attempts"] <= 1, row["last_error"]
    [mail] = mailbox.messages   # once, not at every check
    assert "waiting" in mail["Subject"]
    body = _text_of(mail)
    assert "waiting on crtc since " in body and "past the expected time" in body
    assert len(portals.ledger("crtc")) == 1


def _text_of(mail) -> str:
    """The text part of an escalation mail (it has an HTML alternative too)."""
    return next(p for p in mail.walk() if p.get_content_type() == "text/plain"
                ).get_payload(decode=True).decode()

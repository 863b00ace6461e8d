"""The portal flows run by the real service (`portalq run`) against the stand-ins."""

from __future__ import annotations

import re

import psycopg
import pytest

from jobs import queue
from tests import payloads
from tests.browser import bckit
from tests.mailbox import Mailbox
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = pytest.mark.browser


def _service(db, tmp_path, standin_server, mailbox, **env):
    return Service(db, tmp_path, "flows", PORTALQ_STANDIN_URL=standin_server.base_url,
                   PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                   PORTALQ_RETRY_BASE_SECONDS=0.2, PORTALQ_WORKERS=3, **env)


def _documents(dsn, job_id):
    with psycopg.connect(dsn) as c:
        return {n: bytes(d) for n, d in c.execute(
            "SELECT name, data FROM job_documents WHERE job_id = %s", (job_id,)).fetchall()}


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
            "de": queue.enqueue("file_entity", "ORD-3", payloads.FILE_ENTITY_DE).id,
            "ein": queue.enqueue("obtain_ein", "ORD-3", payloads.OBTAIN_EIN).id,
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
    assert re.fullmatch(r"\d{7}", str(rows["de"]["result"]["file_number"]))
    assert rows["crtc"]["result"]["confirmation"].startswith("CRTC-")
    for key in ("bc", "de", "ein", "crtc"):
        docs = _documents(dsn, jobs[key])
        assert docs and all(d.startswith(b"%PDF-") for d in docs.values()), key
    assert queue.get_job(deliver)["status"] == "completed"
    attached = [p for p in delivered.walk() if p.get_filename()]
    assert attached and attached[0].get_payload(decode=True).startswith(b"%PDF-")
    # each filing reached its portal exactly once
    assert len(bckit.entries(portals, "bc_corporate_online", "incorporation")) == 1
    assert len(portals.ledger("irs_ein")) == 1
    assert len(portals.ledger("delaware_icis")) == 1
    assert len(portals.ledger("crtc")) == 1
    # evidence: screenshots per attempt, listed by `jobs show`
    shown = queue.show_job(jobs["ein"])
    assert any(a["kind"] == "screenshot" for a in shown["artifacts"])


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

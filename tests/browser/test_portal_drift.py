"""A changed portal stops safely (issue 37): the real service (`portalq run`) against the IRS
stand-in whose review page was redesigned. Nothing is submitted; the job type is held for an
operator (``portals.drift_pauses``; the portal's other job types go on), its jobs wait
without spending attempts, one escalation
carries the page's screenshot and aria snapshot beside the expected one; after an audited
resume the jobs run."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from portalq.jobs import queue
from tests import payloads
from tests.conftest import run_cli
from tests.mailbox import Mailbox
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

PORTAL = "irs_ein"
SSNS = ["123-45-6789", "234-56-7891", "345-67-8912"]
#: what each redesign shows on the page (and the flow does not expect)
SEEN = {"label": "Principal business activity",
        "field": "Are you authorized to sign this application?"}


def _payload(i: int) -> dict:
    rp = {**payloads.OBTAIN_EIN["responsible_party"], "ssn": SSNS[i]}
    return {**payloads.OBTAIN_EIN, "responsible_party": rp, "legal_name": f"Drift Widgets {i} LLC"}


def _portal(c: psycopg.Connection) -> tuple:
    """The portal's own pause (by, probe) and obtain_ein's hold for a changed page (its
    reason, or None when it is not held)."""
    by, probe, held = c.execute("SELECT paused_by, probe_at, drift_pauses FROM portalq.portals "
                                "WHERE code = %s", (PORTAL,)).fetchone()
    return by, probe, (held.get("obtain_ein") or {}).get("reason")


@pytest.mark.parametrize("change", ["label", "field"])
def test_changed_review_page_pauses_the_portal_until_an_operator_resumes_it(
        db, dsn, tmp_path, standin_server, portals, change):
    open_all_hours(dsn)
    portals.control(PORTAL, review_changed=change)
    mailbox = Mailbox().start()
    svc = Service(db, tmp_path, "drift", PORTALQ_STANDIN_URL=standin_server.base_url,
                  PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                  PORTALQ_WORKERS=2, PORTALQ_RETRY_BASE_SECONDS=0.2).start()
    try:
        jobs = [queue.enqueue("obtain_ein", f"ORD-D{i}", _payload(i)).id for i in range(3)]
        with psycopg.connect(dsn) as c:
            wait_until(lambda: _portal(c)[2] is not None, 90, "obtain_ein held for drift")
            # whichever runs were under way when it paused end waiting too
            wait_until(lambda: all(queue.get_job(j)["status"] != "running" for j in jobs),
                       60, "no run left")
            [mail] = mailbox.wait_for(1, 30)
            paused_by, probe_at, reason = _portal(c)
            escalations = c.execute("SELECT job_id, kind FROM portalq.escalations").fetchall()
        # obtain_ein held, the portal itself not paused; no probe: no resume by itself
        assert (paused_by, probe_at) == (None, None)
        assert "does not know" in reason and "nothing submitted" in reason
        assert portals.ledger(PORTAL) == []                # nothing submitted
        rows = [queue.get_job(j) for j in jobs]
        assert [(r["status"] in ("pending", "deferred"), r["attempts"]) for r in rows] == [
            (True, 0)] * 3, rows                          # waiting, no attempt spent
        [(escalated, kind)] = escalations                  # exactly one escalation
        assert kind == "portal_changed"

        # its evidence: the masked screenshot, the page's aria snapshot beside the expected
        arts = queue.show_job(escalated)["artifacts"]
        files = {Path(a["path"]).name: Path(a["path"]) for a in arts}
        assert any(a["kind"] == "screenshot" for a in arts)
        page, expected = (files["aria-page.yaml"].read_text(),
                          files["aria-expected.yaml"].read_text())
        assert SEEN[change] in page and SEEN[change] not in expected
        assert "- term: Principal activity" in expected and "Submit EIN Request" in expected
        assert "Drift Widgets" not in page and "Lovelace" not in page   # data left out
        assert not any(s[-4:] in page for s in SSNS)
        # the mail carries them too, and says how to resume
        assert " ".join(str(mail["Subject"]).split()).startswith(
            "[portalq] portal_changed: obtain_ein job")
        attached = {p.get_filename() for p in mail.walk() if p.get_filename()}
        assert {"aria-page.yaml", "aria-expected.yaml"} <= attached
        assert any(n.endswith(".png") for n in attached)
        body = mail.as_string()
        assert f"portalq portals resume {PORTAL} --reason" in body
        assert not any(s in body for s in SSNS)

        # the page is back (or the flow fixed): an operator resumes, audited; the jobs run
        portals.control(PORTAL, review_changed=None)
        out = run_cli("portals", "resume", PORTAL, "--reason", "review page checked")
        assert out.returncode == 0, out.stderr
        wait_until(lambda: all(queue.get_job(j)["status"] == "completed" for j in jobs), 120,
                   "the waiting jobs, after the resume")
        with psycopg.connect(dsn) as c:
            audit = c.execute("SELECT action, target, reason, before->'held' FROM "
                              "portalq.audit_log WHERE action = 'portal.resume'").fetchall()
    finally:
        svc.stop()
        mailbox.stop()
    assert audit == [("portal.resume", f"portal:{PORTAL}", "review page checked",
                      ["obtain_ein"])]
    assert len(portals.ledger(PORTAL)) == 3                # each filed once
    assert [queue.get_job(j)["attempts"] for j in jobs] == [1, 1, 1]
    assert len(mailbox.messages) == 1                      # one escalation, no other mail


def test_a_first_step_option_renamed_stops_twenty_jobs_at_once_and_nothing_else(
        db, dsn, tmp_path, standin_server, portals):
    """Issue 52's drift test: one option label of the first step renamed overnight, 20 EIN
    jobs queued. The first job to meet it stops the flow (no 15 s timeouts, no attempts
    spent), the IRS is paused with one mail; a BC name search runs meanwhile. Restored and
    resumed, all 20 complete, each filed once."""
    open_all_hours(dsn)
    portals.control(PORTAL, renamed_text={"Limited Liability Company (LLC)":
                                          "Limited Liability Company"})
    mailbox = Mailbox().start()
    svc = Service(db, tmp_path, "drift20", PORTALQ_STANDIN_URL=standin_server.base_url,
                  PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                  PORTALQ_WORKERS=2, PORTALQ_RETRY_BASE_SECONDS=0.2).start()
    ssns = [f"{200 + i:03d}-{10 + i:02d}-{4000 + i:04d}" for i in range(20)]
    try:
        jobs = [queue.enqueue("obtain_ein", f"ORD-R{i}", {
            **payloads.OBTAIN_EIN, "legal_name": f"Renamed Widgets {i} LLC",
            "responsible_party": {**payloads.OBTAIN_EIN["responsible_party"], "ssn": ssn}}).id
            for i, ssn in enumerate(ssns)]
        with psycopg.connect(dsn) as c:
            wait_until(lambda: _portal(c)[2] is not None, 90, "obtain_ein held for drift")
            wait_until(lambda: all(queue.get_job(j)["status"] != "running" for j in jobs),
                       60, "no run left")
            other = queue.enqueue("name_search", "ORD-BC1", payloads.NAME_SEARCH).id
            wait_until(lambda: queue.get_job(other)["status"] in ("completed", "failed"), 90,
                       "the BC name search while the IRS is paused")
            [mail] = mailbox.wait_for(1, 30)
            escalations = c.execute("SELECT kind FROM portalq.escalations").fetchall()
        assert queue.get_job(other)["status"] == "completed"   # the other portals run
        assert escalations == [("portal_changed",)]
        text = next(part.get_payload(decode=True).decode() for part in mail.walk()
                    if part.get_content_type() == "text/plain")
        assert "legalStructureInput=LLC" in text and "legalStructure" in text  # step, control
        rows = [queue.get_job(j) for j in jobs]
        assert [(r["status"] in ("pending", "deferred"), r["attempts"]) for r in rows] == [
            (True, 0)] * 20, [(r["status"], r["attempts"]) for r in rows]
        assert portals.ledger(PORTAL) == []

        portals.control(PORTAL, renamed_text=None)
        out = run_cli("portals", "resume", PORTAL, "--reason", "label checked")
        assert out.returncode == 0, out.stderr
        wait_until(lambda: all(queue.get_job(j)["status"] == "completed" for j in jobs), 300,
                   "the 20 waiting jobs, after the resume")
    finally:
        svc.stop()
        mailbox.stop()
    assert len(portals.ledger(PORTAL)) == 20                   # each filed once
    assert [queue.get_job(j)["attempts"] for j in jobs] == [1] * 20
    assert len([m for m in mailbox.messages if "portal_changed" in str(m["Subject"])]) == 1

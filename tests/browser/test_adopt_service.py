"""A job taken over from the old queue (`portalq adopt`) runs to completion by the real
service against the stand-in portal; the one the old queue had running never runs."""

from __future__ import annotations

import json
import re

import psycopg
import pytest

from portalq.jobs import queue
from tests.browser import bckit
from tests.conftest import run_cli
from tests.integration.test_adopt import LEGACY
from tests.mailbox import Mailbox
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_an_adopted_pending_job_runs_to_completion_against_the_standin(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    search = bckit.build(bckit.NAME_SEARCH, names=["Cedar Harbour Consulting Ltd."])
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(LEGACY)
        c.execute("INSERT INTO public.job_queue (job_type, payload, status, order_id) VALUES "
                  "('name_search', %s, 'pending', 'ORD-1'), "
                  "('name_search', %s, 'running', 'ORD-2')",
                  (json.dumps(search), json.dumps(search)))
    out = run_cli("adopt", "--apply", env={"PORTALQ_DATABASE_URL": db})
    assert out.returncode == 0, out.stderr
    [pending] = queue.list_jobs(order_id="ORD-1")
    [running] = queue.list_jobs(order_id="ORD-2")
    assert (pending["status"], running["status"]) == ("pending", "failed")

    mailbox = Mailbox().start()
    svc = Service(db, tmp_path, "adopt", PORTALQ_STANDIN_URL=standin_server.base_url,
                  PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                  PORTALQ_WORKERS=2).start()
    try:
        wait_until(lambda: queue.get_job(pending["id"])["status"] in (
            "completed", "failed"), 90, "the adopted name search")
        # the escalation of the one that may have been filed reaches the admins
        [mail] = mailbox.wait_for(1, 30)
    finally:
        svc.stop()
        mailbox.stop()
    done = queue.get_job(pending["id"])
    assert done["status"] == "completed", done["last_error"]
    assert re.fullmatch(r"NR \d{7}", done["result"]["nr_number"])
    assert len(bckit.entries(portals, "bc_corporate_online", "name_request")) == 1
    held = queue.get_job(running["id"])
    assert (held["status"], held["attempts"]) == ("failed", 0)   # never claimed
    assert "uncertain" in mail["Subject"]

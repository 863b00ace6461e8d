"""Retry with a payload edit, as an operator does it in the console, run by the real service
against the BC Registries stand-in (issue 39 item 3): a rejected Name Request is fixed by
new names, which get a NEW Name Request (its own reference, paid once); the same names are
refused by the console with what would happen, nothing written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from bckit import BC, NAME_SEARCH, build, entries
from consolekit import ConsoleServer, add_users, sign_in_page

from portalq.jobs import queue
from tests.checkpoints import record
from tests.mailbox import Mailbox
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

REJECTED = ["Royal Crown Holdings Ltd.", "Government Widgets Ltd."]
NEW_NAME = "Cedar Harbour Consulting Ltd."


@pytest.fixture
def service(db, dsn, tmp_path, standin_server) -> Iterator[Service]:
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    svc = Service(db, tmp_path, "flows", PORTALQ_STANDIN_URL=standin_server.base_url,
                  PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                  PORTALQ_WORKERS=1, PORTALQ_RETRY_BASE_SECONDS=0.2).start()
    try:
        yield svc
    finally:
        svc.stop()
        mailbox.stop()


def _escalations(dsn: str, job_id: int) -> list[str]:
    with psycopg.connect(dsn) as c:
        return [r[0] for r in c.execute(
            "SELECT kind FROM portalq.escalations WHERE job_id = %s ORDER BY id",
            (job_id,)).fetchall()]


def _edit(run: Any, page: Any, job_id: int, names: list[str], reason: str) -> None:
    async def go() -> None:
        await page.goto(f"/jobs/{job_id}/edit")
        edited = json.loads(await page.locator("#payload-edit").input_value())
        edited["names"] = names
        await page.locator("#payload-edit").fill(json.dumps(edited))
        await page.locator("input[name=reason]").fill(reason)
        async with page.expect_navigation():
            await page.locator("#save-retry").click()
    run(go())


def test_new_names_after_a_rejection_get_a_new_name_request_same_names_are_refused(
        db, dsn, tmp_path, portals, service, browser, run):
    add_users(db)
    job_id = queue.enqueue("name_search", "ORD-NR-1", build(NAME_SEARCH, names=REJECTED)).id
    wait_until(lambda: queue.get_job(job_id)["status"] == "failed", 90, "the rejection")
    first = queue.get_job(job_id)
    assert "REJECTED" in first["last_error"]
    [rejected] = entries(portals, BC, "name_request")

    contexts: list[Any] = []
    with ConsoleServer(dsn, tmp_path / "artifacts") as console:
        try:
            page = run(sign_in_page(browser, console.base, "operator", contexts))
            # the edit page says what a retry of this job does before anything is done
            run(page.goto(f"/jobs/{job_id}/edit"))
            plan = run(page.locator("#retry-plan").inner_text())
            assert first["checkpoint"]["nr_number"] in plan and "REJECTED" in plan
            assert "new Name Request" in plan

            # the same names: refused in one line, nothing written (no second escalation)
            _edit(run, page, job_id, list(REJECTED), "try again")
            assert "unchanged" in run(page.locator("#error").inner_text())
            _edit(run, page, job_id, [REJECTED[1], "Brand New Name Ltd."], "one kept")
            error = run(page.locator("#error").inner_text())
            assert REJECTED[1] in error and "already rejected" in error
            assert queue.get_job(job_id)["status"] == "failed"
            assert queue.get_job(job_id)["attempts"] == first["attempts"]

            # a new name: queued, and the page says a new Name Request is made for it
            _edit(run, page, job_id, [NEW_NAME], "customer chose another name")
            done = run(page.locator("#done").inner_text())
            assert "new Name Request" in done
            wait_until(lambda: queue.get_job(job_id)["status"] in ("completed", "failed"),
                       90, "the new Name Request")
        finally:
            for ctx in contexts:
                run(ctx.close())

    job = queue.get_job(job_id)
    assert job["status"] == "completed", job["last_error"]
    assert job["result"]["name"] == NEW_NAME and job["result"]["nr_state"] == "APPROVED"
    requests = entries(portals, BC, "name_request")
    assert len(requests) == 2   # the rejected one and one new, never the same one again
    assert requests[0] == rejected
    assert [d[0] for d in requests[1]["decisions"]] == [NEW_NAME]
    # a new NR (namex's own numbers: the form has no reference of the client's)
    assert requests[1]["temp_number"] != rejected["temp_number"]
    assert requests[1]["nr_number"] == job["result"]["nr_number"] != rejected["nr_number"]
    cp = job["checkpoint"]
    [earlier] = cp["earlier_nrs"]
    assert earlier["nr_number"] == rejected["nr_number"] and earlier["nr_state"] == "REJECTED"
    # the new NR was requested under a new submission of the job's, not the rejected one's
    assert record(cp, "name_request").reference != earlier["name_request_reference"]
    # one escalation: the rejection; the fixed job opened none
    assert _escalations(dsn, job_id) == ["business"]

"""The console and the escalation mail as the people who use them meet them (issue 39):
documents downloaded open as PDFs, no written form of a job's SSN in any mail or console
response, the error in the failed-jobs list, an inbox that empties itself when the cause
is gone, and a count of what needs a person."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from consolekit import ROLES, ConsoleServer, add_users, assert_no_ssn, sign_in_page
from flowkit import SSN, inflate_all

from portalq.jobs import clock, queue, worker_api
from portalq.portals.standin.kit.pdf import make_pdf
from tests import payloads
from tests.conftest import run_cli

pytestmark = pytest.mark.browser

EIN = "84-1234567"
#: the documents the flows keep, as the stand-in portals hand them out (make_pdf)
DOCUMENTS = {
    "CP575_1764800000000.pdf": (
        ["Department of the Treasury", "Internal Revenue Service", "Notice CP 575"],
        ["WE ASSIGNED YOU AN EMPLOYER IDENTIFICATION NUMBER",
         f"Employer Identification Number: {EIN}", "Responsible party: Ada Lovelace"]),
    "BC1234567.pdf": (["BC Registries and Online Services", "Certificate of Incorporation"],
                      ["I hereby certify that Maple Leaf Widgets Ltd. was incorporated under "
                       "the Business Corporations Act.", "Incorporation Number: BC1234567"]),
    "CRTC-2026-0042.pdf": (["CRTC", "Registration acknowledgement"],
                           ["Confirmation number: CRTC-2026-0042",
                            f"Employer Identification Number on file: {EIN}"]),
}


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    name = pg_server.create()
    url, dsn = pg_server.url(name), pg_server.dsn(name)
    patch = pytest.MonkeyPatch()
    patch.setenv("PORTALQ_DATABASE_URL", url)
    artifacts = tmp_path_factory.mktemp("people-artifacts")
    try:
        add_users(url)
        with ConsoleServer(dsn, artifacts, live_refresh_seconds=30) as server:
            yield {"url": url, "dsn": dsn, "server": server, "base": server.base,
                   "artifacts": artifacts}
    finally:
        patch.undo()
        pg_server.drop(name)


@pytest.fixture
def signin(env, browser, run):
    contexts: list[Any] = []

    def sign_in(role: str) -> Any:
        return run(sign_in_page(browser, env["base"], role, contexts, accept_downloads=True))

    yield sign_in
    for ctx in contexts:
        run(ctx.close())


def _store_documents(run, dsn: str, job_id: int) -> None:
    """Kept as the worker keeps them (jobs.worker_api.store_document: sealed)."""
    async def go() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            for name, (heading, lines) in DOCUMENTS.items():
                await worker_api.store_document(c, job_id=job_id, name=name,
                                                content_type="application/pdf",
                                                data=make_pdf(heading, lines))
    run(go())


# --- item 1: documents download as the PDF they are -------------------------------------------

def test_each_role_that_may_downloads_documents_that_open_as_pdfs(env, signin, run):
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        job_id = queue.enqueue("obtain_ein", "ORD-DOC-1", payloads.OBTAIN_EIN, conn=c).id
    _store_documents(run, env["dsn"], job_id)
    with psycopg.connect(env["dsn"]) as c:
        stored = c.execute("SELECT data FROM portalq.job_documents WHERE job_id = %s",
                           (job_id,)).fetchall()
    assert stored and all(not bytes(d).startswith(b"%PDF-") for (d,) in stored)  # sealed

    for role in ("operator", "admin"):
        page = signin(role)
        run(page.goto(f"/jobs/{job_id}"))
        for name, (_heading, lines) in DOCUMENTS.items():
            async def download(name: str = name, page: Any = page) -> bytes:
                async with page.expect_download() as info:
                    await page.click(f"a[href$='/documents/{name}']")
                dl = await info.value
                assert dl.suggested_filename == name
                return Path(await dl.path()).read_bytes()

            data = run(download())
            assert data.startswith(b"%PDF-"), (role, name, data[:8])
            text = inflate_all(data)
            assert b"%%EOF" in data[-32:]
            for line in lines[-1:]:
                assert line.encode("latin-1") in text, (role, name, line)
        cp575 = run(page.context.request.get(f"/jobs/{job_id}/documents/"
                                             "CP575_1764800000000.pdf"))
        assert cp575.headers["content-type"] == "application/pdf"
        assert EIN.encode() in inflate_all(run(cp575.body()))

    # a viewer: no link, and the download refused (documents name the people behind the
    # entity: operators and admins only, as before)
    page = signin("viewer")
    run(page.goto(f"/jobs/{job_id}"))
    assert run(page.locator("a[href*='/documents/']").count()) == 0
    resp = run(page.context.request.get(f"/jobs/{job_id}/documents/CP575_1764800000000.pdf"))
    assert resp.status == 403 and not run(resp.body()).startswith(b"%PDF-")


# --- item 2: no written form of the SSN in any mail or console response -------------------------

def _forms(ssn: str = SSN) -> dict[str, str]:
    digits = ssn.replace("-", "")
    return {"dashed": ssn, "bare": digits, "spaced": f"{digits[:3]} {digits[3:5]} {digits[5:]}"}


def _mail_texts(msg: Any) -> list[bytes]:
    """Every text of a received mail: the raw message, each header, each part decoded."""
    out = [msg.as_bytes()]
    out += [str(v).encode() for _k, v in msg.items()]
    for part in msg.walk():
        payload = part.get_payload(decode=True)
        if payload:
            out.append(payload)
    return out


def _console_paths(job_id: int) -> list[str]:
    return ["/", "/overview.json", "/jobs", "/jobs.json", "/jobs?status=failed",
            "/jobs?job_type=obtain_ein", f"/jobs/{job_id}", f"/jobs/{job_id}.json",
            "/escalations", "/escalations?all=1", "/audit", "/audit.json"]


def test_no_written_form_of_the_ssn_in_any_mail_or_console_response(env, signin, run):
    """The SSN planted where a careless portal or flow (or a person) would put it: in the
    job's error (bare), the escalation's reason (dashed), a checkpoint (spaced), a
    non-secret payload field (spaced) and an action's reason (dashed): the mail the real
    SMTP server received and every console response, for every role, hold none of its
    forms; the console shows the mail as it was sent (its recipients and link)."""
    from portalq.scheduler import mailer
    from portalq.scheduler.config import Settings
    from tests.mailbox import Mailbox

    forms = _forms()
    dsn = env["dsn"]
    payload = {**payloads.OBTAIN_EIN,
               "principal_activity": f"Software for owner {forms['spaced']}"}
    with psycopg.connect(dsn, autocommit=True) as c:
        job_id = queue.enqueue("obtain_ein", "ORD-SCRUB-1", payload, conn=c).id
        c.execute("""UPDATE portalq.job_queue SET status = 'failed', attempts = 1, finished_at = %s,
                        checkpoint = %s, last_error = %s WHERE id = %s""",
                  (clock.now(), json.dumps({"step": "submit", "ein_application": {
                      "state": "submitting", "note": f"typed {forms['spaced']}"}}),
                   f"portal echoed the SSN {forms['bare']} back", job_id))
        c.execute("INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status, "
                  "error, worker) VALUES (%s, %s, 1, 'running', 'failed', %s, 'w1')",
                  (job_id, clock.now(), f"failed for {forms['dashed']}"))
        queue.escalate(c, job_id, 1, "business", f"rejected: SSN {forms['dashed']} unknown")

    box = Mailbox().start()
    settings = Settings(smtp_url=box.url, admin_emails="ops@example.com",
                        console_url=env["base"], mail_gather_seconds=0)

    async def send() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return (await mailer.send_due_escalations(settings, c)).sent
    try:
        assert run(send()) == 1
        mails = box.wait_for(1, 10)
    finally:
        box.stop()
    assert len(mails) == 1
    texts = _mail_texts(mails[0])
    joined = b"\n".join(texts)
    assert f"Job {job_id}".encode() in joined and b"portal echoed the SSN" in joined
    for name, form in forms.items():
        for text in texts:
            assert form.encode() not in text, f"{name} form in the mail"

    # a person acts with the SSN in the reason
    page = signin("operator")
    run(page.goto(f"/jobs/{job_id}"))
    token = next(c["value"] for c in run(page.context.cookies()) if c["name"] == "csrftoken")
    resp = run(page.context.request.post(f"/jobs/{job_id}/cancel", form={
        "csrftoken": token, "reason": f"customer {forms['dashed']} withdrew"}))
    assert resp.status == 200
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT status FROM portalq.job_queue WHERE id = %s",
                         (job_id,)).fetchone() == ("cancelled",)

    checked = 0
    for role in ROLES:
        page = signin(role)
        for path in _console_paths(job_id) + ([f"/jobs/{job_id}/edit"]
                                              if role != "viewer" else []):
            resp = run(page.context.request.get(path))
            assert resp.status == 200, (role, path)
            body = run(resp.body())
            for name, form in forms.items():
                assert form.encode() not in body, f"{name} form in {role} {path}"
            checked += 1
        # the mail shown is the one that was sent: its recipients and its console link
        run(page.goto(f"/jobs/{job_id}"))
        shown = run(page.locator("pre.mail").first.text_content()) or ""
        assert "To: ops@example.com" in shown and f"{env['base']}/jobs/{job_id}" in shown
        assert_no_ssn(shown, f"{role} stored mail")
    assert checked == 3 * len(_console_paths(job_id)) + 2
    out = run_cli(
        "audit", "--json", "--limit", "50", env={"PORTALQ_DATABASE_URL": env["url"]})
    assert out.returncode == 0, out.stderr
    assert_no_ssn(out.stdout, "portalq audit --json")


# --- item 4: the failed-jobs list shows the error ------------------------------------------------

def test_the_failed_jobs_list_shows_the_error_not_the_last_step(env, signin, run):
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        failed = queue.enqueue("name_search", "ORD-ERR-1", payloads.NAME_SEARCH, conn=c).id
        running = queue.enqueue("name_search", "ORD-ERR-2", payloads.NAME_SEARCH, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 5, finished_at = %s, "
                  "checkpoint = '{\"step\": \"submit\"}', last_error = %s WHERE id = %s",
                  (clock.now(), "PortalUnavailable: IRS answered 503 at the submit page",
                   failed))
        c.execute("UPDATE portalq.job_queue SET status = 'running', attempts = 1, "
                  "checkpoint = '{\"step\": \"sending\"}', last_error = 'an earlier timeout' "
                  "WHERE id = %s", (running,))
    page = signin("viewer")
    for path in ("/jobs?status=failed", "/jobs"):
        run(page.goto(path))
        cell = page.locator(f"tr[data-job='{failed}'] td.what")
        assert run(cell.inner_text()) == "PortalUnavailable: IRS answered 503 at the submit page"
    # a job still on its way says where it is
    run(page.goto("/jobs"))
    assert run(page.locator(f"tr[data-job='{running}'] td.what").inner_text()) == "sending"


# --- item 5: the inbox empties itself; what needs a person is counted ---------------------------

def _inbox(run, page) -> dict[int, str]:
    """{job id: state} of the escalations inbox's rows."""
    run(page.goto("/escalations"))
    rows = run(page.locator("tr[data-escalation]").evaluate_all(
        "rows => rows.map(r => [r.getAttribute('data-job'), "
        "r.querySelector('td.state').innerText])"))
    return {int(j): s for j, s in rows}


def _count(run, page) -> int:
    return int(run(page.locator("#needs-you-count").inner_text()))


def test_the_inbox_empties_itself_when_the_cause_is_gone(env, signin, run):
    """A question answered, an approval given, a failed job retried (and completed): each
    escalation leaves the inbox by itself, with nobody resolving it; the navigation and
    the overview count what still needs a person."""
    from datetime import timedelta

    dsn, now = env["dsn"], clock.now()
    with psycopg.connect(dsn, autocommit=True) as c:
        asks = queue.enqueue("file_entity", "ORD-IN-Q", payloads.FILE_ENTITY_BC, conn=c).id
        waits = queue.enqueue("file_entity", "ORD-IN-A", payloads.FILE_ENTITY_BC, conn=c).id
        fails = queue.enqueue("name_search", "ORD-IN-F", payloads.NAME_SEARCH, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'running', attempts = 1 WHERE id = %s",
                  (asks,))
        c.execute("INSERT INTO portalq.job_questions (job_id, attempt, question, asked_at, deadline) "
                  "VALUES (%s, 1, 'the code e-mailed to ops@example.com', %s, %s)",
                  (asks, now, now + timedelta(minutes=10)))
        queue.escalate(c, asks, 1, "question", "waiting for a person: the code")
        c.execute("UPDATE portalq.job_queue SET status = 'deferred', attempts = 1, run_at = %s, "
                  "checkpoint = jsonb_build_object('approval', jsonb_build_object("
                  "'state', 'pending', 'digest', 'abc')) WHERE id = %s",
                  (now + timedelta(days=7), waits))
        queue.escalate(c, waits, 1, "approval", "at the review page")
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 5, finished_at = %s, "
                  "last_error = 'IRS unavailable' WHERE id = %s", (now, fails))
        queue.escalate(c, fails, 5, "attempts", "every attempt failed")

    page = signin("operator")
    inbox = _inbox(run, page)
    assert {asks, waits, fails} <= set(inbox) and inbox[asks] == "new"
    count = _count(run, page)
    assert count == len(inbox)
    run(page.goto("/"))
    assert int(run(page.locator("#needs-you-total").inner_text())) == count
    viewer = signin("viewer")
    assert _count(run, viewer) == count   # every role sees what waits

    def act(job_id: int, action: str, **fields: str) -> None:
        async def go() -> None:
            await page.goto(f"/jobs/{job_id}")
            form = page.locator(f"form[action$='/{action}']")
            for name, value in {"reason": f"{action} from the inbox test", **fields}.items():
                await form.locator(f"[name={name}]").fill(value)
            async with page.expect_navigation():
                await form.locator("button").first.click()
        run(go())

    act(asks, "answer", answer="483920")
    inbox = _inbox(run, page)
    assert asks not in inbox and _count(run, page) == count - 1
    act(waits, "approve")
    inbox = _inbox(run, page)
    assert waits not in inbox and _count(run, page) == count - 2
    act(fails, "retry")
    with psycopg.connect(dsn, autocommit=True) as c:   # the worker completes it
        c.execute("UPDATE portalq.job_queue SET status = 'completed', finished_at = %s WHERE id = %s",
                  (clock.now(), fails))
    inbox = _inbox(run, page)
    assert fails not in inbox and _count(run, page) == count - 3
    run(page.goto("/"))
    assert int(run(page.locator("#needs-you-total").inner_text())) == count - 3
    # nobody resolved them: they closed by themselves, and the full list says so
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM portalq.escalation_handling h JOIN portalq.escalations e "
                         "ON e.id = h.escalation_id WHERE e.job_id = ANY(%s) AND "
                         "h.resolved_at IS NOT NULL", ([asks, waits, fails],)
                         ).fetchone() == (0,)
    run(page.goto("/escalations?all=1"))
    for job_id, why in ((asks, "answered"), (waits, "decided"), (fails, "completed")):
        state = run(page.locator(f"tr[data-job='{job_id}'] td.state").inner_text())
        assert state.startswith("closed by itself") and why in state, (job_id, state)


# --- item 8: bad input is a 400, the order link is encoded, sign-in throttling is atomic -------

def test_bad_input_is_a_400_not_a_500(env, signin, run):
    page = signin("operator")
    token = next(c["value"] for c in run(page.context.cookies()) if c["name"] == "csrftoken")
    big = "99999999999999999999"
    for path in ("/jobs.json?order_id=%00", "/jobs?order_id=%00",
                 "/jobs?field=legal_name&value=%00", "/jobs.json?field=legal_name&value=a%00b",
                 "/jobs?portal=irs%00", f"/jobs?before={big}", "/audit?target=job:%00",
                 "/audit.json?actor=%00"):
        resp = run(page.context.request.get(path))
        assert resp.status == 400, (path, resp.status)
    for path in (f"/jobs/{big}", f"/jobs/{big}.json"):
        assert run(page.context.request.get(path)).status == 404, path
    for form in ({"action": "cancel", "id": big, "reason": "x"},
                 {"action": "retry", "scope": "filter", "order_id": "\x00", "reason": "x"}):
        resp = run(page.context.request.post("/jobs/bulk", form={"csrftoken": token, **form}))
        assert resp.status == 400, (form, resp.status)
        assert "bad request" not in run(resp.text()).lower()
    resp = run(page.context.request.post(f"/jobs/{big}/cancel", form={
        "csrftoken": token, "reason": "x"}))
    assert resp.status in (400, 404), resp.status


def test_the_order_link_is_url_encoded(env, signin, run):
    order = "ORD 7&status=completed#x+y/z?"
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        job_id = queue.enqueue("name_search", order, payloads.NAME_SEARCH, conn=c).id
    page = signin("viewer")
    run(page.goto(f"/jobs/{job_id}"))

    async def follow() -> None:
        async with page.expect_navigation():
            await page.click("dd a[href^='/jobs?order_id=']")
    run(follow())
    ids = run(page.locator("tr[data-job]").evaluate_all(
        "rows => rows.map(r => r.getAttribute('data-job'))"))
    assert ids == [str(job_id)]
    assert run(page.locator("form.filters input[name=order_id]").input_value()) == order


def test_parallel_sign_ins_are_counted_against_the_limit(env, browser, run):
    """40 wrong passwords at once for one name: at most the limit (5) are checked; the
    rest are refused as throttled, and no more than the limit are recorded."""
    async def go() -> list[int]:
        import asyncio

        ctx = await browser.new_context(base_url=env["base"])
        page = await ctx.new_page()
        await page.goto("/login")
        token = next(c["value"] for c in await ctx.cookies() if c["name"] == "csrftoken")

        async def attempt() -> int:
            resp = await ctx.request.post("/login", form={
                "csrftoken": token, "name": "admin", "password": "wrong password!"},
                max_redirects=0)
            return resp.status
        try:
            return list(await asyncio.gather(*(attempt() for _ in range(40))))
        finally:
            await ctx.close()
    try:
        statuses = run(go())
        with psycopg.connect(env["dsn"]) as c:
            recorded = c.execute("SELECT count(*) FROM portalq.console_login_failures "
                                 "WHERE name = 'admin'").fetchone()[0]
    finally:
        with psycopg.connect(env["dsn"], autocommit=True) as c:
            c.execute("DELETE FROM portalq.console_login_failures")
    assert statuses.count(401) == 5 and statuses.count(429) == 35, statuses
    assert recorded == 5

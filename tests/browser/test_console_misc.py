"""Smaller console defects (issue 48 #14) in real Chromium against a real console: cancelling
an uncertain filing asks first (the page and the server); a completed job opens with its
outcome (EIN, CP 575) above its evidence; a missing static file is a 404 without a
traceback; an error page says what went wrong and keeps where you were; a mail's
``#approve`` anchor survives the sign-in."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from consolekit import PASSWORD, console_env, seed

from portalq.jobs import queue
from tests import event_kinds, payloads
from tests.needs_seed import png

pytestmark = pytest.mark.browser
EIN = "45-0987612"


def _prepare(dsn: str, artifacts: Path) -> dict[str, Any]:
    ids = seed(dsn, artifacts)
    with psycopg.connect(dsn, autocommit=True) as c:
        done = queue.enqueue("obtain_ein", "ORD-EIN-DONE", payloads.OBTAIN_EIN, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'completed', attempts = 1, "
                  "finished_at = now(), result = %s WHERE id = %s",
                  (json.dumps({"ein": EIN, "legal_name": "Acme Widgets LLC",
                               "name_control": "ACME", "documents": ["CP575A.pdf"]}), done))
        folder = artifacts / str(done) / "attempt-1"
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(12):             # a run's screenshots: far more than a screen
            shot = folder / f"{n:02d}-step.png"
            shot.write_bytes(png(1000, 560))
            c.execute("INSERT INTO portalq.job_artifacts (job_id, attempt, kind, path, "
                      "created_at) VALUES (%s, 1, 'screenshot', %s, now())", (done, str(shot)))
        c.execute("INSERT INTO portalq.job_documents (job_id, name, content_type, data, "
                  "created_at) VALUES (%s, 'CP575A.pdf', 'application/pdf', %s, now())",
                  (done, b"%PDF-1.4 stand-in"))
        ids["done"] = done
        # its trace, with the note the tracer wrote (a stretch not traced), and a screenshot
        # that could not be taken
        trace = folder / "trace.zip"
        trace.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
        c.execute("INSERT INTO portalq.job_artifacts (job_id, attempt, kind, path, note, "
                  "created_at) VALUES (%s, 1, 'trace', %s, %s, now()), "
                  "(%s, 1, 'missing', 'screenshot', 'page closed', now())",
                  (done, str(trace), "not traced: 1 stretch whose pages showed personal data"
                   "; after the last one tracing stayed off to the end", done))
        ids["approval"] = queue.enqueue("obtain_ein", "ORD-EIN-APPROVE", payloads.OBTAIN_EIN,
                                        conn=c).id
    event_kinds.awaiting_approval(dsn, ids["approval"])
    return {"ids": ids}


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("misc-artifacts"), _prepare) as found:
        yield found


def _status(dsn: str, job_id: int) -> str:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT status FROM portalq.job_queue WHERE id = %s",
                         (job_id,)).fetchone()[0]


def test_cancelling_an_uncertain_filing_asks_first(env, signin, run):
    """The EIN job failed after its submit was pressed (the portal may have filed): its
    Cancel says so and needs a tick that the portal was checked; without it the server
    refuses too (a form sent without the tick, as a script or an old page would)."""
    job = env["ids"]["ein"]
    page = signin("operator")
    run(page.goto(f"/jobs/{job}"))
    warning = run(page.locator("#cancel-uncertain-warning").inner_text())
    assert "may have" in warning and "filed" in warning, warning
    tick = page.locator("input[name=uncertain_ok]")
    assert run(tick.get_attribute("required")) is not None
    # the tick removed from the form, sent anyway: refused, nothing changed
    run(page.evaluate("document.querySelector('input[name=uncertain_ok]').remove()"))
    run(page.fill("form[action$='/cancel'] input[name=reason]", "duplicate"))
    run(page.click("#cancel"))
    assert "portal was checked" in run(page.locator("#error").inner_text())
    assert _status(env["dsn"], job) == "failed"
    # with the tick: cancelled
    run(page.goto(f"/jobs/{job}"))
    run(page.check("input[name=uncertain_ok]"))
    run(page.fill("form[action$='/cancel'] input[name=reason]", "checked: not filed, dup"))
    run(page.click("#cancel"))
    assert run(page.locator("#done").inner_text()) == "Cancelled."
    assert _status(env["dsn"], job) == "cancelled"
    # a job that did not reach its point of no return cancels without the tick
    other = env["ids"]["bc"]
    run(page.goto(f"/jobs/{other}"))
    assert run(page.locator("input[name=uncertain_ok]").count()) == 0


def test_a_completed_job_opens_with_its_outcome(env, signin, run):
    page = signin("operator")
    run(page.set_viewport_size({"width": 1440, "height": 900}))
    run(page.goto(f"/jobs/{env['ids']['done']}"))
    outcome = page.locator("#outcome")
    text = run(outcome.inner_text())
    assert EIN in text and "Acme Widgets LLC" in text, text
    link = outcome.locator("a", has_text="CP575A.pdf")
    assert run(link.get_attribute("href")) == f"/jobs/{env['ids']['done']}/documents/CP575A.pdf"
    # above the fold, above the evidence
    box = run(outcome.bounding_box())
    assert box["y"] + box["height"] < 900, box
    first_shot = run(page.locator(".gallery img").first.bounding_box())
    assert first_shot["y"] > box["y"] + box["height"]
    # a viewer sees the outcome too (documents are operators' and admins': named only)
    viewer = signin("viewer")
    run(viewer.goto(f"/jobs/{env['ids']['done']}"))
    assert EIN in run(viewer.locator("#outcome").inner_text())
    assert run(viewer.locator("#outcome a", has_text="CP575A.pdf").count()) == 0


def test_a_missing_static_file_is_a_plain_404(env, signin, run, caplog):
    page = signin("viewer")
    with caplog.at_level(logging.INFO):
        resp = run(page.goto("/static/nope.css"))
        assert resp.status == 404
        assert run(resp.text()).strip() == "Not Found"
        assert run(page.goto("/static/console.css")).status == 200
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], \
        [r.getMessage() for r in caplog.records]


def test_an_error_page_says_what_and_keeps_where_you_were(env, signin, run):
    page = signin("operator")
    # a refused search: the list again with the message, every filter kept to correct
    resp = run(page.goto("/jobs?status=failed&portal=irs_ein&field=responsible_party.ssn"
                         "&value=6789"))
    assert resp.status == 400
    assert "secret field" in run(page.locator("#error").inner_text())
    assert run(page.title()).startswith("Jobs")
    assert run(page.locator("select[name=status]").input_value()) == "failed"
    assert run(page.locator("select[name=portal]").input_value()) == "irs_ein"
    assert run(page.locator(".filters input[name=field]").input_value()) == "responsible_party.ssn"
    # a job that is not there: "Not found", not "Not done"
    resp = run(page.goto("/jobs/999999"))
    assert resp.status == 404
    assert run(page.locator("h1").inner_text()) == "Not found"
    assert run(page.title()).startswith("Not found")
    # an action refused on a job's page: back to that page, not to the overview
    job = env["ids"]["done"]
    run(page.goto(f"/jobs/{job}"))
    run(page.evaluate(f"""() => {{
        const f = document.createElement('form'); f.method = 'post';
        f.action = '/jobs/{job}/cancel';
        for (const [k, v] of [['csrftoken', document.querySelector('input[name=csrftoken]')
                                               .value], ['reason', 'late']]) {{
            const i = document.createElement('input'); i.name = k; i.value = v;
            f.appendChild(i); }}
        document.body.appendChild(f); f.submit(); }}"""))
    run(page.wait_for_load_state())
    assert run(page.locator("h1").inner_text()) == "Not done"
    assert "completed" in run(page.locator("#error").inner_text())
    assert run(page.locator("#back").get_attribute("href")) == f"/jobs/{job}"


def test_a_mails_approve_anchor_survives_the_sign_in(env, browser, run):
    job = env["ids"]["approval"]
    ctx = run(browser.new_context(base_url=env["base"]))
    try:
        page = run(ctx.new_page())
        run(page.goto(f"/jobs/{job}#approve"))          # the mail's link, signed out
        assert "/login" in page.url
        run(page.fill("input[name=name]", "operator"))
        run(page.fill("input[name=password]", PASSWORD))
        run(page.click("button[type=submit]"))
        run(page.wait_for_url(f"**/jobs/{job}#approve"))
        assert run(page.evaluate("location.hash")) == "#approve"
    finally:
        run(ctx.close())




def test_the_job_page_says_what_the_trace_leaves_out(env, signin, run):
    page = signin("viewer")
    run(page.goto(f"/jobs/{env['ids']['done']}"))
    note = run(page.locator(".trace-note").inner_text())
    assert "not traced: 1 stretch" in note and "stayed off to the end" in note, note
    # evidence that could not be taken is said as such, not offered as a download
    missing = run(page.locator(".evidence-missing").inner_text())
    assert "screenshot" in missing and "page closed" in missing, missing
    assert run(page.locator(".gallery a", has_text="screenshot").count()) == 0


def test_uncertain_filings_of_one_outage_are_one_card_resolved_together(env, signin, run):
    """Eight uncertain filings from one outage were eight cards: now one, listing them, with
    "Not filed, all of these" behind a preview (the jobs, a warning, a reason) -- nothing
    changes until it is confirmed; then each resumes and has its own audit entry."""
    from tests.checkpoints import in_doubt, state

    ids = []
    with psycopg.connect(env["dsn"], autocommit=True) as c:
        for n in range(8):
            j = queue.enqueue("obtain_ein", f"ORD-OUTAGE-{n}", payloads.OBTAIN_EIN, conn=c).id
            c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 1, "
                      "finished_at = now(), checkpoint = %s, last_error = %s WHERE id = %s",
                      (json.dumps(in_doubt("ein_application")),
                       f"uncertain: IRS connection reset after submit (request {700 + n})", j))
            queue.escalate(c, j, 1, "uncertain", "the IRS may have assigned the EIN")
            ids.append(j)
    page = signin("operator")
    run(page.goto("/needs"))
    cards = page.locator("article.need.uncertain", has_text="connection reset after submit")
    assert run(cards.count()) == 1
    card = cards.first
    assert sorted(int(i) for i in run(card.get_attribute("data-jobs")).split()) == ids
    assert run(card.locator(".n").inner_text()) == "8 ×"
    run(card.locator("button", has_text="Not filed, all of these").click())
    run(page.wait_for_url("**/jobs/bulk"))
    preview = run(page.locator("#bulk-preview").inner_text())
    assert "8" in preview and "resume" in preview, preview
    assert "checked" in run(page.locator("#bulk-warning").inner_text())
    assert sorted(int(h.rsplit("/", 1)[1]) for h in run(
        page.locator(".ids a").evaluate_all("as => as.map(a => a.getAttribute('href'))"))) == ids
    with psycopg.connect(env["dsn"]) as c:            # nothing done by the preview
        assert c.execute("SELECT count(*) FROM portalq.job_queue WHERE id = ANY(%s) "
                         "AND status = 'failed'", (ids,)).fetchone()[0] == 8
    run(page.fill("input[name=reason]", "IRS: none of them arrived (checked by phone)"))
    run(page.click("button.danger"))
    assert run(page.locator("#bulk-result").inner_text()).startswith("8 job(s) resumed")
    with psycopg.connect(env["dsn"]) as c:
        rows = c.execute("SELECT status, checkpoint FROM portalq.job_queue WHERE id = ANY(%s)",
                         (ids,)).fetchall()
        audited = c.execute("SELECT count(*) FROM portalq.audit_log WHERE action = "
                            "'job.not_filed' AND target = ANY(%s)",
                            ([f"job:{i}" for i in ids],)).fetchone()[0]
    assert [(s, state(cp, "ein_application")) for s, cp in rows] == [
        ("pending", "not_filed")] * 8
    assert audited == 8


def test_a_bulk_cancel_of_an_uncertain_filing_asks_first_too(env, signin, run):
    """The bulk cancel would otherwise bypass the single cancel's question: its preview
    names the filings in doubt and needs the tick; without it the server refuses."""
    from tests.checkpoints import in_doubt

    with psycopg.connect(env["dsn"], autocommit=True) as c:
        doubt = queue.enqueue("obtain_ein", "ORD-BULK-U", payloads.OBTAIN_EIN, conn=c).id
        plain = queue.enqueue("obtain_ein", "ORD-BULK-P", payloads.OBTAIN_EIN, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 1, "
                  "finished_at = now(), checkpoint = %s WHERE id = %s",
                  (json.dumps(in_doubt("ein_application")), doubt))
    page = signin("operator")

    def preview() -> None:
        run(page.goto("/jobs?job_type=obtain_ein"))
        for job in (doubt, plain):
            run(page.check(f"tr[data-job='{job}'] input.pick"))
        run(page.locator("select[name=action]").select_option("cancel"))
        run(page.fill("#bulk input[name=reason]", "orders withdrawn"))
        run(page.click("#bulk button[type=submit]"))

    preview()
    warning = run(page.locator("#bulk-warning").inner_text())
    assert f"#{doubt}" in warning and f"#{plain}" not in warning, warning
    assert run(page.locator("input[name=uncertain_ok]").get_attribute("required")) is not None
    run(page.evaluate("document.querySelector('input[name=uncertain_ok]').remove()"))
    run(page.click("button.danger"))
    assert "portal was checked" in run(page.locator("#error").inner_text())
    assert (_status(env["dsn"], doubt), _status(env["dsn"], plain)) == ("failed", "pending")
    preview()
    run(page.check("input[name=uncertain_ok]"))
    run(page.click("button.danger"))
    assert run(page.locator("#bulk-result").inner_text()).startswith("2 job(s) cancelled")
    assert _status(env["dsn"], doubt) == "cancelled"

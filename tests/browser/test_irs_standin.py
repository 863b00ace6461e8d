"""The IRS stand-in against its facts (``tests/facts/irs-applyein.txt``): its texts are the
extract's, its pages are a single-page app with the real routes, step indicator, controls,
inline answers, idle modal and in-page letter — and none of the marks the real app lacks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from portalq.portals.irs import standin_texts as tx

pytestmark = pytest.mark.browser

FACTS = (Path(__file__).parents[1] / "facts" / "irs-applyein.txt").read_text()
PORTAL = "irs_ein"
#: marks of the old stand-ins that no real portal has
FOREIGN = ["#portal-closed", "#maintenance", "#system-error", "[data-code]", "ol.progress",
           "[aria-current=step]", "[role=alert]", "#signin-form", "#notice", ".error"]


def section(number: int) -> str:
    start = FACTS.index(f"== {number}.")
    end = FACTS.find("\n== ", start + 1)
    return FACTS[start:end if end > 0 else None]


def facts_alerts() -> dict[str, tuple[str, list[str]]]:
    """§5 as {"<page>/<key>": (errorMsg, [text, ...])}."""
    out: dict[str, tuple[str, list[str]]] = {}
    key = ""
    for line in section(5).splitlines():
        if m := re.match(r"\s*\[(\w+|all steps) / (\w+)\](?:\s*errorMsg: (.*))?$", line):
            key = f"{'all' if m.group(1) == 'all steps' else m.group(1)}/{m.group(2)}"
            out[key] = (m.group(3) or "", [])
        elif m := re.match(r"\s*errorMsg:\s+(.*)$", line):
            out[key] = (m.group(1), out[key][1])
        elif m := re.match(r"\s*text:\s+(.*)$", line):
            out[key][1].append(m.group(1))
    return out


def test_every_alert_text_is_the_facts_text():
    facts = facts_alerts()
    assert len(facts) == 18  # identity 9, reviewAndSubmit 7, input errors 2
    ours = {k: (msg.rstrip(), lines) for k, (msg, lines) in tx.ALERTS.items()}
    assert ours == {k: (msg.rstrip(), lines) for k, (msg, lines) in facts.items()}


def test_routes_labels_and_review_texts_are_the_facts():
    routes = {m.group(1): m.group(2) for m in re.finditer(
        r"/applyein/(\w*)\s+key=\w+\s+title=\"([^\"]+)\"", section(1))}
    for route, (title, _) in tx.ROUTES.items():
        assert routes[route] == title, route
    assert "Labels: " + " | ".join(tx.STEP_LABELS) in section(2)
    six, seven, nine = section(6), section(7), section(9)
    for text in (tx.LETTER_DIGITAL, tx.LETTER_MAIL, tx.LETTER_REQUIRED, tx.SUBMIT_INSTRUCTIONS,
                 tx.CANCEL_ARIA):
        assert text in six, text
    for text in (tx.CONGRATULATIONS, tx.SAVE_PRINT, tx.DIGITAL_NOTE, tx.MAIL_NOTE, tx.DOWNLOAD,
                 *tx.FIELDS):
        assert text in seven, text
    assert "structures: " + " | ".join(tx.STRUCTURES.values()) in nine
    assert "reasons: " + " | ".join(tx.REASONS.values()) in nine
    controls = " ".join(
        (Path(__file__).parents[1] / "facts" / "irs-bundle-controls.txt").read_text().split())
    for name, options in tx.SUB_TYPES.values():
        assert f'"{name}")' in controls, name
        for value, text in options.items():
            assert f'{value} "{text}"' in controls, (name, value)
    for key, words in tx.FIELD_NAMES.items():  # the content files' field names
        assert words in controls, key
    assert tx.CONFIRM_ERROR in nine and tx.LLC_MEMBERS in nine
    assert tx.MORE_TIME in section(8) and "Your session will expire in M:SS." in section(8)


# --- the pages in Chromium --------------------------------------------------------------

@pytest.fixture
def page(run, browser):
    context = run(browser.new_context(accept_downloads=True))
    page = run(context.new_page())
    page.set_default_timeout(5000)
    yield page
    run(context.close())


async def foreign_marks(page: Any) -> list[str]:
    return [s for s in FOREIGN if await page.locator(s).count()]


async def begin(page: Any, base: str) -> None:
    await page.goto(base + "/applyein/")
    await page.evaluate("() => { window.__sameDocument = true; }")
    await page.get_by_role("link", name="Begin Application Now").click()
    await page.wait_for_url("**/applyein/legalStructure")


def test_steps_change_without_a_document_load_and_show_the_real_indicator(run, portals, page):
    async def scenario():
        await begin(page, portals.url("irs"))
        heading = await page.locator("h2.stepIndicator-heading").inner_text()
        active = await page.locator("li.stepIndicator-item .sr-only").all_inner_texts()
        same = await page.evaluate("() => window.__sameDocument === true")
        return heading, active, same, await foreign_marks(page)

    heading, active, same, marks = run(scenario())
    assert heading == "Step 1of 6: Legal Structure" and same and marks == []
    assert active == ["Legal Structure active", "Identity not active", "Addresses not active",
                      "Additional Details not active", "Review & Submit not active",
                      "EIN Assignment not active"]


def test_radio_input_clicks_do_not_register_and_errors_are_inline(run, portals, page):
    async def scenario():
        await begin(page, portals.url("irs"))
        radio = page.locator("#LLClegalStructureInputid")
        await radio.dispatch_event("click")  # a click on the input, not on its label
        assert not await page.locator("#members-group").is_visible()  # the app ignored it
        await page.get_by_role("button", name="Continue").click()
        alert = page.locator("div[aria-live=polite] h2")
        await alert.wait_for()
        assert page.url.endswith("/legalStructure")
        return (await alert.inner_text(), await page.locator("div[aria-live=polite]").inner_text(),
                await foreign_marks(page))

    heading, text, marks = run(scenario())
    # structure, reason, the checkbox: the state is the LLC's question only (facts: the
    # bundle's controls §2)
    assert heading == "The following 3 errors have occurred:" and marks == []
    assert "Legal Structure: Selection is required." in text and tx.CONFIRM_ERROR in text


def test_closed_portal_routes_to_service_unavailable(run, portals, page):
    portals.control(PORTAL, hours="closed")

    async def scenario():
        await page.goto(portals.url("irs") + "/applyein/")
        await page.get_by_role("link", name="Begin Application Now").click()
        await page.wait_for_url("**/applyein/serviceUnavailable")
        return await page.title(), await foreign_marks(page)

    assert run(scenario()) == ("Service Unavailable", [])


def test_idle_modal_then_session_expired(run, portals, page):
    portals.control(PORTAL, idle_ms=600)

    async def scenario():
        await begin(page, portals.url("irs"))
        dialog = page.get_by_role("dialog")
        await dialog.wait_for()
        text = await dialog.inner_text()
        await page.wait_for_url("**/applyein/sessionExpired")
        return text, await page.title()

    text, title = run(scenario())
    assert tx.MORE_TIME in text and re.search(r"Your session will expire in 0:0\d\.", text)
    assert title == "Session Expired"


# --- the EIN Assignment page as the real bundle renders it (tests/facts/irs-ein-assignment.txt)

RECORDED = (Path(__file__).parents[1] / "facts" / "irs-ein-assignment.txt").read_text()

ASSIGNMENT_DOM = """() => ({
  dl: document.querySelectorAll('dl, dt, dd').length,
  tables: [...document.querySelectorAll('div.summaryInfoTable')].map((box) => ({
    header: box.querySelector(':scope > h3').innerText.trim(),
    groups: [...box.querySelectorAll('.summary-information-table-component')].map((g) => ({
      title: g.querySelector(':scope > h3').innerText.trim(),
      rows: [...g.querySelectorAll('table > tbody > tr')].map((tr) => [
        tr.querySelector('td:first-child > b').innerText.trim(),
        tr.cells[1].innerText.trim()])}))})),
  ein: [...document.querySelectorAll('table tr')].filter((tr) =>
    tr.cells[0].innerText.trim() === 'EIN assigned').map((tr) =>
    tr.cells[1].querySelector('b') && tr.cells[1].querySelector('b').innerText),
  buttons: [...document.querySelectorAll('.irs-button')].map((b) => [b.tagName, b.role || '',
    b.getAttribute('role'), b.id, b.getAttribute('aria-label')])})"""


def recorded_rows() -> list[str]:
    start = RECORDED.index("== 3.")
    return re.findall(r'^  row "([^"]+)"', RECORDED[start:RECORDED.index("== 4.")], re.M)


def test_ein_assignment_is_the_bundles_summary_tables(run, portals, make_ctx, ein_payload):
    """Reached through the flow's own steps (the page is read before the flow would close it):
    the EIN in the summary-table component, the application's summary below it with its own
    "Legal name" row, buttons as role=button anchors with the one id — no dl/dt/dd."""
    from portalq.portals.flows.base import browser_page
    from portalq.portals.irs.flow import ApplyForEin

    ctx = make_ctx("obtain_ein", ein_payload(applicant="responsible_party"))

    async def scenario() -> dict[str, Any]:
        async with browser_page(ctx) as (page, evidence):
            irs, p = ApplyForEin(ctx, page, evidence), ctx.args
            await irs.open()
            await irs.legal_structure(p)
            await irs.identity(p)
            await irs.addresses(p)
            await irs.details(p)
            answer = await irs.submit_application(await irs.prepare_submit(p))
            assert answer.kind == "assigned"
            return await page.evaluate(ASSIGNMENT_DOM)

    dom = run(scenario())
    assert dom["dl"] == 0
    [ein_table, summary] = dom["tables"]
    assert 'tableHeader "Your EIN", group "Your EIN Details"' in RECORDED
    assert (ein_table["header"], [g["title"] for g in ein_table["groups"]]) == \
        ("Your EIN", ["Your EIN Details"])
    [rows] = [g["rows"] for g in ein_table["groups"]]
    assert [label for label, _ in rows] == recorded_rows()
    values = dict(rows)
    assert re.fullmatch(r"\d{2}-\d{7}", values["EIN assigned"]) and dom["ein"] == [
        values["EIN assigned"]]
    assert values["Legal name"] == "ACME WIDGETS LLC" and values["Name control"] == "ACME"
    assert summary["header"] == "Summary of your information"
    summary_rows = dict(r for g in summary["groups"] for r in g["rows"])
    assert summary_rows["Legal name"] == "ACME WIDGETS LLC"
    assert re.fullmatch(r"XXX-XX-\d{4}", summary_rows["SSN/ITIN"])
    assert 'id is always "anchor-ui-0"' in RECORDED
    assert {(tag, role, i) for tag, _, role, i, _ in dom["buttons"]} == {
        ("A", "button", "anchor-ui-0")}
    assert {aria for *_, aria in dom["buttons"]} >= {
        tx.DOWNLOAD, "Print Page", "Exit Application", "Apply for another EIN"}

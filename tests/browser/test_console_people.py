"""The console and the escalation mail as the people who use them meet them (issue 39):
documents downloaded open as PDFs, no written form of a job's SSN in any mail or console
response, the error in the failed-jobs list, an inbox that empties itself when the cause
is gone, and a count of what needs a person."""

from __future__ import annotations

import json
from collections.abc import Iterator
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any

import psycopg
import pytest
from consolekit import PASSWORD, ROLES, ConsoleServer, add_users, assert_no_ssn
from flowkit import SSN, inflate_all

from jobs import clock, queue, worker_api
from portals.standin.kit.pdf import make_pdf
from tests import payloads

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
    contexts = []

    def sign_in(role: str) -> Any:
        async def go() -> Any:
            ctx = await browser.new_context(base_url=env["base"], accept_downloads=True)
            ctx.set_default_timeout(10_000)
            contexts.append(ctx)
            page = await ctx.new_page()
            await page.goto("/login")
            await page.fill("input[name=name]", role)
            await page.fill("input[name=password]", PASSWORD)
            await page.click("button[type=submit]")
            await page.wait_for_url(env["base"] + "/")
            return page
        return run(go())

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
        stored = c.execute("SELECT data FROM job_documents WHERE job_id = %s",
                           (job_id,)).fetchall()
    assert stored and all(not bytes(d).startswith(b"%PDF-") for (d,) in stored)  # sealed

    for role in ("operator", "admin"):
        page = signin(role)
        run(page.goto(f"/jobs/{job_id}"))
        for name, (_heading, lines) in DOCUMENTS.items():
            async def download(name: str = name) -> bytes:
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

"""Evidence never decides an outcome (issue 12, defect 1): traces of concurrent contexts in
one browser do not collide; a trace or screenshot that cannot be made is recorded as
missing, leaves no partial file, and the flow's outcome stands."""

from __future__ import annotations

import asyncio
import json
import zipfile

import pytest

from portalq.portals.flows.base import Evidence
from portalq.portals.flows.browser import MISSING_EVIDENCE, close_context, new_context, untraced
from portalq.portals.irs.flow import obtain_ein

pytestmark = pytest.mark.browser


def missing(folder):
    path = folder / MISSING_EVIDENCE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_concurrent_contexts_in_one_browser_each_keep_a_whole_trace(run, browser,
                                                                     browser_config, tmp_path):
    """All workers of a process share one browser. Contexts that traced under one name
    overwrote each other's intermediate files: 55 of 300 stops failed with three contexts
    at once ("file data stream has unexpected number of bytes")."""
    config = browser_config.with_(trace_policy="on")

    async def one(i: int, round_: int) -> None:
        folder = tmp_path / f"c{i}-r{round_}"
        context = await new_context(browser, config, folder)
        page = await context.new_page()
        for step in range(3):
            await page.set_content(f"<p>context {i} step {step}</p>" + "<i>x</i>" * 200)
            await page.click("p")
            async with untraced(context):
                await page.set_content("<p>private</p>")
            await page.set_content("<p>after</p>")
        await close_context(context, failed=False)

    async def scenario() -> None:
        for round_ in range(6):
            await asyncio.gather(*(one(i, round_) for i in range(3)))

    run(scenario())
    folders = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(folders) == 18
    for folder in folders:
        assert missing(folder) == [], folder
        with zipfile.ZipFile(folder / "trace.zip") as z:
            assert z.testzip() is None
            names = set(z.namelist())
        # four traced stretches per context, all kept
        assert {"trace.trace", "trace2.trace", "trace3.trace", "trace4.trace"} <= names
        assert not list(folder.glob(".*part*.zip"))


def test_a_trace_that_cannot_be_saved_is_missing_evidence_not_a_failure(
        run, portals, make_ctx, ein_payload):
    ctx = make_ctx("obtain_ein", ein_payload(), trace_policy="on")

    async def break_tracing(context):
        # what a browser-side tracing failure looks like to us: the trace's next stop fails
        await context.tracing.stop()

    ctx.context_hooks.append(break_tracing)
    result = run(obtain_ein(ctx))
    assert result["ein"]                                  # the outcome stands
    [note] = missing(ctx.artifacts_dir)
    assert note["what"] == "trace" and note["reason"]
    assert not (ctx.artifacts_dir / "trace.zip").exists()
    assert not list(ctx.artifacts_dir.glob(".*part*.zip"))  # no partial file left
    assert len(portals.ledger("irs_ein")) == 1


def test_a_screenshot_that_cannot_be_taken_is_recorded_missing(run, browser, browser_config,
                                                               make_ctx, ein_payload):
    ctx = make_ctx("obtain_ein", ein_payload())

    async def scenario() -> bool:
        context = await new_context(browser, browser_config, ctx.artifacts_dir)
        page = await context.new_page()
        await page.set_content("<p>hello</p>")
        await page.close()                      # the page is gone: no screenshot possible
        ok = await Evidence(ctx).shot(page, "landing")
        await close_context(context, failed=False)
        return ok

    assert run(scenario()) is False
    [note] = missing(ctx.artifacts_dir)
    assert note["what"] == "screenshot landing"
    assert not list(ctx.artifacts_dir.glob("*.png"))


def test_a_context_whose_evidence_folder_cannot_be_made_still_opens(run, browser,
                                                                    browser_config, tmp_path):
    """Issue 35 item 8: new_context made the folder first and raised NotADirectoryError
    into the flow; evidence never decides an outcome, so the page works untraced."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    config = browser_config.with_(trace_policy="on")

    async def scenario() -> str:
        context = await new_context(browser, config, blocker / "attempt-1")
        page = await context.new_page()
        await page.set_content("<p>works</p>")
        text = await page.inner_text("p")
        await close_context(context, failed=True)
        return text

    assert run(scenario()) == "works"

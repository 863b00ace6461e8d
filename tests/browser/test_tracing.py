"""playwright.config, traced contexts, and the guarantee that SSNs never reach a trace."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from flowkit import SSN, artifact_blobs, assert_no_secret

from portalq.jobs.errors import UncertainOutcome
from portalq.portals.flows import browser as browser_mod
from portalq.portals.flows.browser import (
    BrowserConfig,
    close_context,
    evidence_notes,
    is_tracing,
    load_config,
    new_context,
    parse_config,
    untraced,
)
from portalq.portals.irs.flow import obtain_ein

REPO_CONFIG = Path(__file__).resolve().parents[2] / "playwright.config"


# --- configuration (no browser) ---------------------------------------------------------

def test_repo_config_is_read():
    config = load_config(env={})
    assert config.source == str(REPO_CONFIG)
    assert config.headless and config.trace_policy == "retain-on-failure"
    assert config.sandbox and "--no-sandbox" not in config.args and config.action_ms > 0


def test_retired_artifacts_section_is_ignored_with_a_warning():
    with pytest.warns(DeprecationWarning, match="PORTALQ_RETENTION_DAYS"):
        config = parse_config({"artifacts": {"retention_days": 30},
                               "timeouts": {"action_ms": 1234}}, "old.toml")
    assert config.action_ms == 1234


def test_config_from_env_and_ws_override(tmp_path):
    path = tmp_path / "pw.toml"
    path.write_text('[browser]\nexecutable_path = "/opt/chrome"\n[trace]\npolicy = "off"\n'
                    '[timeouts]\naction_ms = 1234\n')
    config = load_config(env={"PORTALQ_PLAYWRIGHT_CONFIG": str(path),
                              "PORTALQ_BROWSER_WS": "ws://browsers:3000/"})
    assert (config.executable_path, config.trace_policy, config.action_ms) == \
        ("/opt/chrome", "off", 1234)
    assert config.ws_endpoint == "ws://browsers:3000/"
    assert config.navigation_ms == BrowserConfig().navigation_ms  # unspecified: default


def test_missing_default_file_means_defaults(monkeypatch, tmp_path):
    monkeypatch.setattr(browser_mod, "DEFAULT_CONFIG_PATH", tmp_path / "absent.config")
    assert load_config(env={}) == BrowserConfig()
    with pytest.raises(FileNotFoundError):
        load_config(env={"PORTALQ_PLAYWRIGHT_CONFIG": str(tmp_path / "named-but-absent")})


@pytest.mark.parametrize("text, message", [
    ('[trace]\npolicy = "sometimes"\n', "trace.policy must be one of"),
    ('[browser]\nheadles = true\n', "unknown key browser.headles"),
    ('[timeouts]\naction_ms = "fast"\n', "timeouts.action_ms must be int"),
    ('[proxy]\nx = 1\n', "unknown section [proxy]"),
    ('[browser\n', "not valid TOML"),
])
def test_bad_config_is_a_clear_error(tmp_path, text, message):
    path = tmp_path / "pw.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(path)


# --- traced contexts --------------------------------------------------------------------

def trace_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


@pytest.mark.browser
def test_irs_trace_never_contains_the_identity_to_submit_part(run, portals, make_ctx,
                                                               ein_payload):
    ctx = make_ctx("obtain_ein", ein_payload(), trace_policy="on")
    ein = run(obtain_ein(ctx))["ein"]
    members = trace_members(ctx.artifacts_dir / "trace.zip")
    # two traced stretches: up to Legal Structure, and from the EIN page on
    assert {"trace.trace", "trace.network", "trace2.trace", "trace2.network"} <= set(members)
    assert b"Legal Structure" in members["trace.trace"]
    assert ein.encode() in members["trace2.trace"]
    everything = b"\n".join(members.values())
    # the empty identity form may show (the page Continue lands on); nothing typed into it,
    # no later page and no request made from it was recorded
    for never in (b"Founder", b"Jane", b"Dover", b"/applyein/addAddresses",
                  b"/applyein/reviewAndSubmit", b"/api/eligibility", b"/api/application",
                  b"XXX-XX-6789"):
        assert never not in everything, never
    assert assert_no_secret(ctx.artifacts_dir) > 5


@pytest.mark.browser
def test_the_irs_trace_says_what_it_leaves_out(run, portals, make_ctx, ein_payload):
    """Issue 48 #14: the EIN job's trace has a gap from the identity page to the submit;
    a note beside the trace says so (the job page and ``jobs show`` show it)."""
    ctx = make_ctx("obtain_ein", ein_payload(), trace_policy="on")
    run(obtain_ein(ctx))
    notes = evidence_notes(ctx.artifacts_dir)
    assert list(notes) == ["trace.zip"], notes
    assert notes["trace.zip"].startswith("not traced: 1 stretch"), notes
    assert "personal data" in notes["trace.zip"]


@pytest.mark.browser
def test_trace_of_a_failure_inside_the_sensitive_part(run, portals, make_ctx, ein_payload):
    portals.control("irs_ein", drop_after_submit=True)
    ctx = make_ctx("obtain_ein", ein_payload(), trace_policy="retain-on-failure")
    with pytest.raises(UncertainOutcome):
        run(obtain_ein(ctx))
    assert (ctx.artifacts_dir / "trace.zip").exists()  # failed: kept
    assert list(ctx.artifacts_dir.glob("*-failure.png"))
    assert_no_secret(ctx.artifacts_dir)
    assert not list(ctx.artifacts_dir.glob(".*part*.zip"))  # no partial trace left


@pytest.mark.browser
@pytest.mark.parametrize("policy, kept", [("on", True), ("off", False),
                                          ("retain-on-failure", False)])
def test_policy_on_success(run, browser, browser_config, tmp_path, policy, kept):
    async def scenario():
        context = await new_context(browser, browser_config.with_(trace_policy=policy), tmp_path)
        page = await context.new_page()
        await page.set_content("<p>hello</p>")
        await page.click("p")
        return await close_context(context, failed=False)

    path = run(scenario())
    assert (path is not None) == kept == (tmp_path / "trace.zip").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["trace.zip"] if kept else [])


@pytest.mark.browser
def test_untraced_resumes_only_on_a_clean_page(run, browser, browser_config, tmp_path):
    config = browser_config.with_(trace_policy="on")

    async def scenario(navigate_away: bool):
        context = await new_context(browser, config, tmp_path)
        page = await context.new_page()
        await page.set_content("<label for=s>SSN</label><input id=s name=taxid>")
        await page.fill("#s", "public-before")
        async with untraced(context, secrets=[SSN]):
            assert not is_tracing(context)
            await page.fill("#s", SSN)
            if navigate_away:
                await page.set_content("<p>thank you</p>")
        resumed = is_tracing(context)
        if resumed:
            await page.click("p")
        await close_context(context, failed=False)
        return resumed

    assert run(scenario(navigate_away=False)) is False  # the input still holds the SSN
    first = trace_members(tmp_path / "trace.zip")
    assert b"public-before" in first["trace.trace"] and "trace2.trace" not in first
    # the trace says it ends early, and why
    assert "stayed off to the end" in evidence_notes(tmp_path)["trace.zip"]
    assert run(scenario(navigate_away=True)) is True
    second = trace_members(tmp_path / "trace-2.zip")
    assert b"thank you" in second["trace2.trace"]
    assert "stayed off" not in evidence_notes(tmp_path)["trace-2.zip"]
    assert_no_secret(tmp_path)


@pytest.mark.browser
def test_why_not_chunks_the_network_log_outlives_a_chunk_boundary(run, browser, portals,
                                                                  tmp_path):
    """stop_chunk/start_chunk would not keep a POST out of the trace (hence ``untraced``
    stops the trace). If this fails, Playwright now resets the network log per chunk:
    ``untraced`` could then use chunks instead of stopping and restarting the trace."""
    async def scenario():
        context = await browser.new_context()
        await context.tracing.start(snapshots=True)
        page = await context.new_page()
        await page.goto(portals.url("irs") + "/applyein/")
        await context.tracing.stop_chunk(path=tmp_path / "one.zip")
        await page.evaluate("url => fetch(url, {method: 'POST', body: 'ssn=' + '123456789'})",
                            portals.url("irs") + "/applyein/api/session")
        await page.goto(portals.url("irs") + "/applyein/")
        await context.tracing.start_chunk()
        await page.reload()
        await context.tracing.stop_chunk(path=tmp_path / "two.zip")
        await context.tracing.stop()
        await context.close()

    run(scenario())
    leaked = [where for where, data in artifact_blobs(tmp_path) if b"123456789" in data]
    assert any("two.zip!" in where for where in leaked), (
        f"the POST body no longer reaches the next chunk (found in: {leaked}): "
        "revisit portals.flows.browser.untraced")

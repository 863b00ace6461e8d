"""A flow through a remote browser: ``playwright run-server`` + ``chromium.connect``.

run-server launches the browser itself, with launch options the client sends in the
``x-playwright-launch-options`` header; it honours ``executablePath``/``args`` only when
started with ``--unsafe`` (without it, it would look for Playwright's own Chromium download).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from flowkit import assert_no_secret

from portalq.portals.flows.browser import launch, load_config, resolve_executable
from portalq.portals.irs.flow import obtain_ein

pytestmark = pytest.mark.browser


@pytest.fixture
def run_server() -> Iterator[str]:
    # its own process group: `python -m playwright` runs the server as a node child, which
    # terminating python alone would orphan; and that node server outlives SIGTERM/SIGINT
    proc = subprocess.Popen(
        [sys.executable, "-m", "playwright", "run-server", "--port", "0",
         "--host", "127.0.0.1", "--unsafe"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(ws://\S+)", line)
        assert match, f"run-server did not start: {line!r}"
        yield match.group(1)
    finally:  # the client has closed its browser by now: nothing to shut down gracefully
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout:
            proc.stdout.close()


def test_obtain_ein_through_a_remote_browser(run, playwright, browser_config, run_server,
                                             portals, make_ctx, ein_payload):
    config = browser_config.with_(
        ws_endpoint=run_server,
        executable_path=resolve_executable(playwright, browser_config) or "",
        trace_policy="on")
    remote = run(launch(playwright, config))
    try:
        assert remote.is_connected()
        # the responsible party in person: the application the IRS answers with the letter
        ctx = make_ctx("obtain_ein", ein_payload(applicant="responsible_party"), config=config,
                       browser=remote)
        result = run(obtain_ein(ctx))
    finally:
        run(remote.close())
    assert re.fullmatch(r"\d{2}-\d{7}", result["ein"])
    assert ctx.documents.by_job[ctx.job_id][0][2].startswith(b"%PDF-")  # download streamed
    assert (ctx.artifacts_dir / "trace.zip").exists()  # trace streamed back from the server
    assert_no_secret(ctx.artifacts_root)
    assert len(portals.ledger("irs_ein")) == 1


def test_env_selects_the_remote_browser():
    config = load_config(env={"PORTALQ_BROWSER_WS": "ws://127.0.0.1:9/"})
    assert config.ws_endpoint == "ws://127.0.0.1:9/"

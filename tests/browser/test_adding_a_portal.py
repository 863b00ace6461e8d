"""docs/adding-a-portal.md works as written: its four files, copied into a plugin package,
run their own test -- enqueued from the CLI through PORTALQ_PLUGINS, run by ``portalq run``
against the toy stand-in, killed with SIGKILL right after submit, filed once (issue 14) --
on the typed flow API and ``portalq.testing``, in fewer lines than the page they replaced
(issue 40)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.browser

DOC = ROOT / "docs" / "adding-a-portal.md"
BLOCK = re.compile(r"^```python (\S+)\n(.*?)^```$", re.M | re.S)


def files_of_the_doc() -> dict[str, str]:
    return {path: body for path, body in BLOCK.findall(DOC.read_text())}


def test_the_document_names_at_most_four_files():
    files = files_of_the_doc()
    assert sorted(files) == ["toy_portal/flow.py", "toy_portal/portal.py",
                             "toy_portal/standin.py", "toy_portal/test_toy.py"]
    assert len(DOC.read_text().splitlines()) < 166   # issue 40 (it was 311 lines)


def write_the_plugin(tmp_path: Path) -> Path:
    plugin = tmp_path / "plugin"
    for path, body in files_of_the_doc().items():
        (plugin / path).parent.mkdir(parents=True, exist_ok=True)
        (plugin / path).write_text(body)
    return plugin


def mypy_strict(plugin: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    # portalq as it installs (tools/package_view.py: mypy finds portalq.jobs by its folder;
    # the command runs in that copy, so "." on MYPYPATH is portalq's)
    return subprocess.run([sys.executable, str(ROOT / "tools" / "package_view.py"),
                           sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--cache-dir", str(cache), "-m", "toy_portal.portal",
                           "-m", "toy_portal.flow"],
                          capture_output=True, text=True, timeout=280,
                          env={**os.environ, "MYPYPATH": os.pathsep.join([str(plugin), "."])})


def test_the_toy_flow_type_checks_strictly(tmp_path):
    """Typed end to end (issue 40): ``ctx.args`` is the job type's model to the type
    checker too -- a misspelt field in the flow is an error."""
    plugin = write_the_plugin(tmp_path)
    out = mypy_strict(plugin, tmp_path / "cache")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    flow = plugin / "toy_portal" / "flow.py"
    flow.write_text(flow.read_text().replace("ctx.args.company", "ctx.args.compnay"))
    out = mypy_strict(plugin, tmp_path / "cache")
    assert '"ToyApplication" has no attribute "compnay"' in out.stdout, out.stdout[-3000:]


@pytest.mark.e2e
def test_the_toy_portal_from_the_document_files_once(db, tmp_path):
    plugin = write_the_plugin(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(ROOT)]),
           "PORTALQ_DATABASE_URL": db, "PORTALQ_HOME": str(tmp_path / "home")}
    env.pop("PORTALQ_PLUGINS", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(plugin), str(plugin / "toy_portal" / "test_toy.py")],
                         cwd=plugin, env=env, capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 passed" in out.stdout

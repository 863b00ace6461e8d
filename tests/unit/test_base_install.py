"""Issue 40: the console and its single sign-on are an extra; the base install runs the
queue, the service and the CLI without them (the service itself: tests/integration/
test_base_install.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from portalq.scheduler.cli.console import CONSOLE_MODULES
from tests.base_install import base_install
from tests.conftest import ROOT

IMPORT_ALL = """
import json, sys
from portalq.scheduler import cli
cli._register()                      # every command of the CLI
import portalq.scheduler.service     # what `portalq run` runs
import portalq.scheduler.worker, portalq.scheduler.tick, portalq.portals.catalogue
loaded = sorted({m for m in sys.modules if m.split(".")[0] in CONSOLE
                 or m.startswith("portalq.scheduler.console")
                 or m in ("portalq.jobs.admin.users", "portalq.jobs.admin.sso")})
print(json.dumps(loaded))
"""


def test_the_cli_and_the_service_import_no_console_package() -> None:
    code = f"CONSOLE = {CONSOLE_MODULES!r}\n{IMPORT_ALL}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def _base(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(base_install([sys.executable, "-m", "portalq", *args]),
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_console_without_its_extra_is_one_line_naming_it() -> None:
    for args in (["console"], ["users", "list"]):
        out = _base(*args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stderr.count("\n") == 1, out.stderr
        assert "pip install 'portalq[console]'" in out.stderr
        assert out.stderr.startswith("portalq: error: the console is not installed")


def test_the_base_install_runs_the_cli() -> None:
    out = _base("--help")
    assert out.returncode == 0, out.stderr
    assert "run" in out.stdout and "console" in out.stdout

"""The documentation's command-line reference is generated from the commands themselves:
a command, an option or a help text added or changed without regenerating the page fails
here (`python docs/gen/cli_ref.py` rewrites it)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

GENERATOR = ROOT / "docs" / "gen" / "cli_ref.py"
PAGE = ROOT / "docs" / "reference" / "cli.md"


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    # its own process: the generator registers the CLI's command groups, once
    return subprocess.run([sys.executable, str(GENERATOR), *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def test_the_committed_cli_page_is_what_the_commands_say() -> None:
    result = _generate("--check")
    assert result.returncode == 0, result.stderr


def test_every_command_has_its_section() -> None:
    page = PAGE.read_text()
    for command in ("portalq run", "portalq enqueue", "portalq jobs retry", "portalq jobs answer",
                    "portalq portals set-hours", "portalq keys rotate", "portalq adopt",
                    "portalq orders show", "portalq webhooks add", "portalq users add"):
        assert f"`{command}`" in page, command
    assert "`--payload-patch`" in page and "`--confirmed-filed`" in page


def test_a_changed_page_is_caught(tmp_path) -> None:
    """The check compares the whole page: a command renamed on the page fails it."""
    page = tmp_path / "cli.md"
    page.write_text(PAGE.read_text().replace("`portalq jobs cancel`", "`portalq jobs kill`", 1))
    result = _generate("--check", "--page", str(page))
    assert result.returncode == 1 and "out of date" in result.stderr

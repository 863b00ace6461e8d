"""Which system Chromium a local launch picks when Playwright's own is not installed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from portalq.portals.flows.browser import system_chromium


def _executable(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_headless_launches_prefer_the_headless_shell(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # Debian's chromium-headless-shell is the build Playwright itself launches headless:
    # the same engine without the desktop browser around it (half the CPU of `chromium
    # --headless` in the browser tests)
    full = _executable(tmp_path, "chromium")
    shell = _executable(tmp_path, "chromium-headless-shell")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert system_chromium(headless=True) == str(shell)
    assert system_chromium(headless=False) == str(full)


def test_without_the_headless_shell_the_full_browser_runs_headless(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = _executable(tmp_path, "chromium")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert system_chromium(headless=True) == str(full)
    (tmp_path / "chromium").unlink()
    assert system_chromium(headless=True) is None

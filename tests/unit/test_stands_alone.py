"""The repository stands alone (issue 50): no tracked file points to a folder outside it
(``../shared``, ``/work/shared``). A fact the code relies on is in ``docs/portals/*.md`` with
its public source (a URL, or a public repository and path), which any reader can open."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT

OUTSIDE = re.compile(r"\.\./shared\b|/work/shared\b"
                     r"|\bshared/(portal-facts\.md|portals/|bench/peers|DESIGN\.md|STYLE\.md)")

EXEMPT: tuple[str, ...] = ()


def references(root: Path, paths: list[str]) -> list[str]:
    found = []
    for rel in paths:
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue   # binary (a PDF, a font), or a path git lists that is not a file
        found += [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
                  if OUTSIDE.search(line)]
    return found


def test_no_tracked_file_points_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    assert len(tracked) > 300
    checked = [p for p in tracked
               if not p.startswith(EXEMPT) and p != "tests/unit/test_stands_alone.py"]
    found = references(ROOT, checked)
    assert not found, ("references to files outside the repository (carry the fact into "
                       "docs/portals/*.md with its public source):\n" + "\n".join(found))


def test_the_search_finds_each_form(tmp_path):
    (tmp_path / "a.md").write_text(
        "see ../shared/portal-facts.md\nand /work/shared/portals/irs.txt\nshared/x is not\n"
        "nor is shared/portals/irs.txt\n")
    (tmp_path / "b.pdf").write_bytes(b"%PDF-\xff\xfe ../shared")
    found = references(tmp_path, ["a.md", "b.pdf", "gone.md"])
    assert [f.split(":")[1] for f in found] == ["1", "2", "4"]

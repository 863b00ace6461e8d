"""The CLI's exit codes are one named set (issue 40): the numbers scripts rely on, each
documented in ``ExitCode``'s docstring (the reference page is made from it), and no command
exits with a bare number."""

from __future__ import annotations

import re
from pathlib import Path

from portalq.scheduler.cli.common import ExitCode

ROOT = Path(__file__).resolve().parents[2]


def test_the_numbers_scripts_rely_on():
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0, "ERROR": 1, "BAD_INPUT": 2, "REFUSED": 3, "UNAVAILABLE": 4, "INTERRUPTED": 130}


def test_every_code_is_documented_in_the_table():
    doc = ExitCode.__doc__ or ""
    rows = re.findall(r"^\s*(\d+)\s+``(\w+)``\s+\S", doc, flags=re.M)
    assert sorted((int(n), name) for n, name in rows) == sorted((int(c), c.name) for c in ExitCode)


def test_no_command_exits_with_a_bare_number():
    literal = re.compile(r"(typer\.Exit|sys\.exit)\(\d+\)|\bcode=\d+\b|\breturn [01]\b"
                         r"|\bfail\(.*,\s*\d+\)")
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
             for p in sorted((ROOT / "scheduler").glob("*.py"))
             if p.name.startswith("cli") or p.name == "demo.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if literal.search(line)]
    assert not found, "\n".join(found)

"""The import graph of portalq (issue 40): no cycle between modules, function-local imports
counted; and every import left inside a function says why on its line or the one before.

A cycle hidden by an import inside a function is still a cycle: a reader following a call
goes round it, and the two modules can only be understood together. grimp (import-linter's
graph) records function-local imports like the others. Imports under ``TYPE_CHECKING`` are
left out: they never run."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("jobs", "scheduler", "portals")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def _describe(graph: grimp.ImportGraph, comp: list[str]) -> str:
    """One cycle through ``comp``, with the lines that make it."""
    first = comp[0]
    back = next(graph.find_shortest_chain(importer=nxt, imported=first)
                for nxt in sorted(graph.find_modules_directly_imported_by(first))
                if nxt in comp)
    chain = [first, *back]
    lines = []
    for a, b in zip(chain, chain[1:], strict=False):
        details = graph.get_import_details(importer=a, imported=b)
        where = ", ".join(f"line {d['line_number']}: {d['line_contents']}" for d in details)
        lines.append(f"  {a} -> {b}  ({where})")
    return " -> ".join(chain) + "\n" + "\n".join(lines)


def test_the_package_has_no_import_cycle():
    # grimp reads the package by walking its folder: in the installed layout
    # (tools/package_view.py), as the folders are mapped into portalq by setup.py
    code = ("import grimp\n"
            "from tests.unit.test_import_graph import _cycles, _describe\n"
            "graph = grimp.build_graph('portalq', cache_dir=None, "
            "exclude_type_checking_imports=True)\n"
            "print(len(graph.modules))\n"
            "print('\\n'.join(_describe(graph, c) for c in _cycles(graph)))\n")
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "package_view.py"),
                          sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    count, cycles = out.stdout.split("\n", 1)
    assert int(count) > 100   # the whole package was read
    assert not cycles.strip(), "import cycles:\n" + cycles


def test_the_cycle_finder_finds_one_made_by_a_function_local_import():
    graph = grimp.ImportGraph()
    for m in ("p.a", "p.b", "p.c"):
        graph.add_module(m)
    graph.add_import(importer="p.a", imported="p.b", line_number=1, line_contents="import p.b")
    graph.add_import(importer="p.b", imported="p.c", line_number=1, line_contents="import p.c")
    assert _cycles(graph) == []
    graph.add_import(importer="p.c", imported="p.a", line_number=9,
                     line_contents="from p import a")
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]
    assert "p.c -> p.a  (line 9: from p import a)" in _describe(graph, ["p.a", "p.b", "p.c"])


def local_imports(source: str) -> list[tuple[int, bool]]:
    """(line, has a reason) of each import inside a function: a reason is a comment on the
    import's first line, or on the line before the run of imports it belongs to."""
    lines = source.splitlines()
    nodes: dict[int, ast.Import | ast.ImportFrom] = {}
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            nodes.update((n.lineno, n) for n in ast.walk(fn)
                         if isinstance(n, ast.Import | ast.ImportFrom))
    ends = {n.end_lineno: n for n in nodes.values()}
    found: dict[int, bool] = {}
    for start in sorted(nodes):
        first = start
        while first - 1 in ends:   # the run of imports this one belongs to
            first = ends[first - 1].lineno
        found[start] = ("#" in lines[start - 1]
                        or first >= 2 and lines[first - 2].strip().startswith("#"))
    return sorted(found.items())


def test_every_function_local_import_gives_its_reason():
    missing, kept = [], 0
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            for line, reasoned in local_imports(path.read_text()):
                kept += 1
                if not reasoned:
                    missing.append(f"{rel}:{line}")
    print(f"{kept} function-local imports, each with its reason")
    assert not missing, ("function-local imports without a reason (hoist them to the top, "
                         "or say on the line or the one before why they wait):\n"
                         + "\n".join(missing))


def test_the_checker_tells_a_reasoned_import_from_a_bare_one():
    source = ("import os\n\n"
              "def f():\n"
              "    import json\n"
              "    # the browser only when a job runs\n"
              "    import playwright\n"
              "    import playwright.async_api\n"
              "    x = 1\n"
              "    import csv  # stdlib, but only here\n"
              "    import re\n")
    assert local_imports(source) == [(4, False), (6, True), (7, True), (9, True), (10, False)]

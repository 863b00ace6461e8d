"""Every handle a portal flow finds a control by has a source.

A portal whose flow drives a browser declares its handles in ``portals/<portal>/handles.py``
(``SOURCED``: handle -> the facts file and the text in it that fixes the handle; ``VALUES``:
the option values it chooses, each with its source). For each such portal: each literal its
flow passes to a finder is declared, each declared source contains its quote and the quote
the handle, and each option value chosen is declared. A browser flow without a table fails
unless it is listed in ``PENDING`` (those whose real sources are still being gathered)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: browser flows whose handles table (with quoted sources) is not written yet: this list only
#: shrinks. BC has a table of source notes, a bcgov file or "[I]" the stand-in's own
#: (portals/bc/handles.py, checked by tests/unit/test_bc_handles.py), not yet quotes.
PENDING = {"bc", "delaware", "crtc"}
#: the finders: their first argument is a handle
FINDERS = {"fill", "fill_named", "select_named", "pick", "control", "present", "go_on",
           "button", "click", "submit", "select"}


def browser_portals() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "portals").glob("*/flow.py")
                  if "browser_page" in p.read_text())


def declared() -> list[str]:
    """The browser flows with a table of quoted sources (``SOURCED``)."""
    return [p for p in browser_portals() if (ROOT / "portals" / p / "handles.py").exists()
            and "SOURCED" in (ROOT / "portals" / p / "handles.py").read_text()]


def used(portal: str) -> tuple[set[str], set[tuple[str, str]]]:
    """The literal handles the flow passes to finders, and the (name, value) options it picks."""
    handles: set[str] = set()
    options: set[tuple[str, str]] = set()
    tree = ast.parse((ROOT / "portals" / portal / "flow.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):  # names in a loop
            names = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)]
            handles.update(names)
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                        and call.func.attr == "pick" and len(call.args) > 1 \
                        and isinstance(call.args[1], ast.Constant):
                    options.update((n, call.args[1].value) for n in names)
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else ""
        literals = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str)
                    else None for a in node.args]
        if name in FINDERS and literals and literals[0] is not None:
            handles.add(literals[0])
            if name == "pick" and len(literals) > 1 and literals[1] is not None:
                options.add((literals[0], literals[1]))
        if name in {"get_by_role", "get_by_label"}:
            handles.update(k.value.value for k in node.keywords if k.arg == "name"
                           and isinstance(k.value, ast.Constant))
            if name == "get_by_label" and literals and literals[0] is not None:
                handles.add(literals[0])
    return handles, options


def table(portal: str):
    return importlib.import_module(f"portalq.portals.{portal}.handles")


def test_every_browser_flow_has_a_handles_table_or_is_pending():
    portals = browser_portals()
    assert "irs" in portals and "crtc" in portals  # the scan sees the browser flows
    missing = set(portals) - set(declared()) - PENDING
    assert missing == set(), f"browser flows with no handles table: {sorted(missing)}"
    assert not PENDING & set(declared()), "a portal with a table is no longer pending"


@pytest.mark.parametrize("portal", declared())
def test_every_handle_the_flow_uses_is_declared(portal):
    handles, options = used(portal)
    assert handles, portal  # the scan sees the flow's finders
    t = table(portal)
    undeclared = handles - set(t.SOURCED)
    assert undeclared == set(), f"{portal}: handles with no source: {sorted(undeclared)}"
    unsourced = {f"{n}={v}" for n, v in options if v not in t.VALUES.get(n, {})}
    assert unsourced == set(), f"{portal}: option values with no source: {sorted(unsourced)}"
    assert not getattr(t, "GAPS", frozenset()), f"{portal}: gaps left: {t.GAPS}"


@pytest.mark.parametrize("portal", declared())
def test_each_source_contains_its_quote_and_the_quote_the_handle(portal):
    t = table(portal)
    for handle, source in t.SOURCED.items():
        text = (ROOT / source.file).read_text()
        assert source.quote in text, (handle, source)
        assert handle in source.quote, (handle, source.quote)
    for name, values in t.VALUES.items():
        assert name in t.SOURCED, name
        for value, source in values.items():
            assert source.quote in (ROOT / source.file).read_text(), (name, value, source)
            assert value in source.quote, (name, value, source.quote)


def test_irs_structures_and_their_words_are_the_content_files():
    from portalq.portals.irs import handles
    from portalq.portals.irs.flow import LETTERS, STRUCTURE_VALUES, SUFFIXES
    from portalq.portals.irs.review import STRUCTURES

    assert set(STRUCTURE_VALUES.values()) <= set(handles.VALUES["legalStructureInput"])
    controls = (ROOT / handles.CONTROLS).read_text()
    for payload, (label, sub) in STRUCTURES.items():
        assert f'{STRUCTURE_VALUES[payload]} "{label}"' in controls, payload
        assert sub is None or f'"{sub}"' in controls, sub
    for value, label in (("DIGITAL", LETTERS["digital"]), ("MAIL", LETTERS["mail"])):
        assert f'{value} "{label}"' in controls
    assert set(SUFFIXES.values()) == set(handles.VALUES["responsibleSuffix"])
    # the selects of unknown options are sourced selects
    assert handles.OPTIONS_UNKNOWN <= set(handles.SOURCED)


def test_irs_every_select_has_its_values_or_is_listed_as_of_unknown_options():
    from portalq.portals.irs import handles

    tree = ast.parse((ROOT / "portals" / "irs" / "flow.py").read_text())
    selects = {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute) and n.func.attr == "select_named"
               and isinstance(n.args[0], ast.Constant)}
    assert "startDateMonthInput" in selects
    assert selects <= set(handles.VALUES) | handles.OPTIONS_UNKNOWN, selects

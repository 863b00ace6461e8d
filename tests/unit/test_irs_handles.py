"""Every handle the IRS flow finds a control by has a source (``portals/irs/handles.py``):
each literal the flow passes to a finder is declared; a declared source contains its quote
and the quote the handle; the handles without a source are exactly the listed gaps."""

from __future__ import annotations

import ast
from pathlib import Path

from portalq.portals.irs import handles
from portalq.portals.irs.flow import STRUCTURE_VALUES

ROOT = Path(__file__).resolve().parents[2]
FLOW = ROOT / "portals" / "irs" / "flow.py"
#: the flow's finders: the first argument is a handle (a group's for radio: its second too)
FINDERS = {"fill", "fill_named", "radio", "pick", "choose", "control", "present", "go_on"}


def used_handles() -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(FLOW.read_text())):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):  # radios in a loop
            found.update(e.value for e in node.iter.elts if isinstance(e, ast.Constant))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else ""
        literals = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str)
                    else None for a in node.args]
        if name in FINDERS:   # the handle; a radio's option label is one too
            found.update(v for v in literals[:2 if name == "radio" else 1] if v is not None)
        if name in {"get_by_role", "get_by_label"}:
            found.update(k.value.value for k in node.keywords if k.arg == "name"
                         and isinstance(k.value, ast.Constant))
            if name == "get_by_label":
                found.update(v for v in literals[:1] if v is not None)
    return found


def test_every_handle_the_flow_uses_is_declared():
    used = used_handles()
    assert {"legalStructureInput", "responsibleSsn", "Continue", "State"} <= used  # the scan sees
    undeclared = used - set(handles.SOURCED) - handles.GAPS
    assert undeclared == set(), f"handles with no declaration: {sorted(undeclared)}"


def test_each_source_contains_its_quote_and_the_quote_the_handle():
    for handle, source in handles.SOURCED.items():
        text = (ROOT / source.file).read_text()
        assert source.quote in text, (handle, source)
        assert handle in source.quote, (handle, source.quote)


def test_option_values_are_sourced_or_listed_gaps():
    for name, values in handles.VALUES.items():
        assert name in handles.SOURCED
        for value, source in values.items():
            if source is not None:
                assert source.quote in (ROOT / source.file).read_text(), (name, value)
                assert value in source.quote, (name, value, source.quote)
    assert set(STRUCTURE_VALUES.values()) == set(handles.VALUES["legalStructureInput"])
    gaps = {f"{n}={v}" for n, vs in handles.VALUES.items() for v, s in vs.items() if s is None}
    assert gaps == {"legalStructureInput=CORPORATIONS", "legalStructureInput=PARTNERSHIPS",
                    "entityRoleRadioInput=no"}


def test_the_gaps_are_the_listed_ones_and_all_still_used():
    # a gap closed (sourced) or no longer used leaves this list: it only shrinks knowingly
    assert handles.GAPS <= used_handles()
    assert len(handles.GAPS) == 27
    assert not handles.GAPS & set(handles.SOURCED)

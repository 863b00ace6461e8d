"""Lookup authority (issue 53): each portal's declaration beside its flow, the lookup code
reading it, and the docs' table matching it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from portalq.portals import lookups

DOC = Path(__file__).resolve().parents[2] / "docs" / "portals" / "lookup-authority.md"
BEGIN, END = "<!-- lookup-authority:begin -->\n", "<!-- lookup-authority:end -->"


def test_the_docs_table_is_the_declarations():
    text = DOC.read_text()
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert table == lookups.authority_table(), (
        "docs/portals/lookup-authority.md differs from the portals' lookup_authority.py: "
        "paste portalq.portals.lookups.authority_table() between its markers")


def test_every_portal_that_waits_or_submits_declares_its_authority_with_a_source():
    declared = lookups.authorities()
    assert set(lookups.RULES) <= set(declared)          # every waiting rule has one
    assert ("irs_ein", "ein_application") in declared   # and the portal with no lookup
    for a in declared.values():
        assert a.source.strip() and a.vouches.strip()
        # a page nobody has sourced is never read: "none known" says so
        assert a.page is None or a.page.strip()


def test_the_lookup_code_reads_the_declaration(monkeypatch):
    """How conclusive a "not found" is comes from the declaration, not from a second copy:
    a portal that declared a conclusive "not found" gets it in its rule."""
    key = ("bc_corporate_online", "name_request")
    declared = lookups.authorities()
    changed = replace(declared[key], not_found_conclusive_after=timedelta(hours=6))
    monkeypatch.setattr(lookups, "authorities", lambda: {**declared, key: changed})
    assert lookups.rule(*key).not_found_conclusive_after == timedelta(hours=6)
    assert lookups.rule("delaware_icis", "formation").not_found_conclusive_after is None

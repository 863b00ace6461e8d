"""What a retry of a BC name search does with its finished Name Request
(portals/bc/name_requests.py): the flow and the console decide from the same plan."""

from __future__ import annotations

from portalq.portals.bc.name_requests import plan

REJECTED = {"nr_number": "NR 1234567", "nr_state": "REJECTED",
            "nr_decisions": [["Royal Crown Ltd.", "REJECTED", "restricted word: ROYAL"],
                             ["Cedar Widgets Ltd.", "REJECTED", "too descriptive"]]}


def test_no_finished_nr_no_plan():
    assert plan({"names": ["A Ltd."]}, {}) is None
    assert plan({"names": ["A Ltd."]}, {**REJECTED, "nr_state": "APPROVED"}) is None
    assert plan({"names": ["A Ltd."]}, {**REJECTED, "nr_state": "INPROGRESS"}) is None


def test_the_same_names_read_it_again_spacing_and_case_aside():
    p = plan({"names": ["royal crown ltd", "Cedar  Widgets Ltd."]}, REJECTED)
    assert p is not None and p.same and not p.new
    assert p.refused and "unchanged" in p.refused and "NR 1234567" in p.says


def test_new_names_get_a_new_nr():
    p = plan({"names": ["Harbour Consulting Ltd."]}, REJECTED)
    assert p is not None and p.new and p.refused is None
    assert "new Name Request for Harbour Consulting Ltd." in p.says


def test_a_name_rejected_before_is_never_requested_again():
    earlier = {**REJECTED, "nr_number": "NR 7654321",
               "nr_decisions": [["Old Name Ltd.", "REJECTED", "in use"]]}
    cp = {**REJECTED, "earlier_nrs": [earlier],
          "nr_for_names": ["Royal Crown Ltd.", "Cedar Widgets Ltd."]}
    p = plan({"names": ["OLD NAME LTD.", "Fresh Ltd."]}, cp)
    assert p is not None and not p.new and p.refused
    assert "'Old Name Ltd.' in NR 7654321" in p.refused   # as the registry wrote it


def test_the_names_saved_before_the_request_count_over_the_decisions():
    cp = {**REJECTED, "nr_for_names": ["Royal Crown Ltd."]}
    assert plan({"names": ["Royal Crown Ltd."]}, cp).same   # type: ignore[union-attr]

"""What a person sees of a job: secret fields masked, every form of a secret scrubbed,
edits that leave the mask keep the stored value."""

from __future__ import annotations

import json

import pytest

from portalq.jobs.secrets import redaction as masking
from tests import payloads

SSN = "123-45-6789"


def _job(**extra):
    return {"id": 7, "job_type": "obtain_ein", "payload": json.loads(json.dumps(
        payloads.OBTAIN_EIN)), "rate_key": "abc", **extra}


@pytest.mark.parametrize("form", ["123-45-6789", "123456789", "123 45 6789", "123.45.6789",
                                  "123 - 45 - 6789"])
def test_every_form_of_the_secret_is_scrubbed_everywhere(form):
    job = _job(last_error=f"rejected {form}!", events=[{"error": f"x{form}y"}],
               checkpoint={"note": form})
    public = masking.public_job(job)
    text = json.dumps(public)
    assert "6789" not in text.replace("(secret: unchanged)", "")
    assert public["payload"]["responsible_party"]["ssn"] == masking.MASK
    assert public["payload"]["legal_name"] == "Widgets LLC"
    assert "rate_key" not in public and public["last_error"] == "rejected ***!"


def test_a_job_type_without_secrets_is_left_alone():
    job = {"job_type": "name_search", "payload": payloads.NAME_SEARCH, "last_error": "e 604"}
    assert masking.public_job(job)["payload"] == payloads.NAME_SEARCH


def test_an_edit_leaving_the_mask_keeps_the_stored_secret_and_a_new_value_replaces_it():
    old = payloads.OBTAIN_EIN
    shown = masking.masked_payload("obtain_ein", old)
    shown["legal_name"] = "Other LLC"
    kept = masking.unmask_edit("obtain_ein", old, shown)
    assert kept["responsible_party"]["ssn"] == SSN
    assert masking.merge_patch(old, kept) == {"legal_name": "Other LLC"}
    shown["responsible_party"]["ssn"] = "987-65-4321"
    assert masking.unmask_edit("obtain_ein", old, shown)["responsible_party"]["ssn"] == \
        "987-65-4321"


def test_merge_patch_round_trips_through_the_queue_merge():
    from portalq.jobs.queue import _merge

    old = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}
    new = {"a": 1, "b": {"c": 5}, "e": [2], "f": "x"}
    assert _merge(old, masking.merge_patch(old, new)) == new


def test_secret_fields_and_their_parents_are_not_searchable():
    assert masking.field_is_secret(["obtain_ein"], "responsible_party.ssn")
    assert masking.field_is_secret(["obtain_ein"], "responsible_party")
    assert not masking.field_is_secret(["obtain_ein"], "legal_name")


def test_ssn_shaped_text_is_scrubbed_from_lists():
    assert masking.scrub_ssn_like({"e": "id 123-45-6789 / 123456789 / EIN 12-3456789"}) == \
        {"e": "id *** / *** / EIN 12-3456789"}

"""portalq.jobs.limits.check_payload_strings decides by a look at the payload's JSON when it can:
it must refuse exactly what the walk of every key and string refuses (and name the path)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from portalq.jobs import limits
from portalq.jobs.errors import InputError

# the characters on either side of each line the checks draw, and a few ordinary ones
EDGES = "\x00\x01\x08\t\n\x0b\x0c\r\x1f \"\\/\x7f\x80\x85\x9f\xa0é\u2027\u2028\u2029\u202a" \
        "\ud7ff\ud800\udbff\udc00\udfff\ue000\ufffd\U0001f600aZ09-"
text = st.text(alphabet=st.sampled_from(EDGES), max_size=6)
leaves = st.one_of(text, st.integers(), st.floats(allow_nan=False), st.booleans(),
                   st.none())
payloads = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)), max_leaves=8)


def verdict(check, payload) -> str | None:
    try:
        check(payload, "payload")
    except InputError as exc:
        return str(exc)
    return None


@settings(max_examples=3000, deadline=None)
@given(st.dictionaries(text, payloads, max_size=4))
def test_the_json_look_refuses_what_the_walk_refuses(payload):
    assert verdict(limits.check_payload_strings, payload) == verdict(
        limits._walk_payload_strings, payload)


@pytest.mark.parametrize("value", ["a\x00", "\x1f", "\x7f", "\x85", "\u2028", "\u2029",
                                   "\ud800", "é\x9f", "x\x0b"])
def test_each_refused_character_is_refused_in_a_value_and_a_key(value):
    with pytest.raises(InputError, match=r"^payload\.k\.x must not contain"):
        limits.check_payload_strings({"k": {"x": value}})
    with pytest.raises(InputError, match="must not contain"):
        limits.check_payload_strings({"k": {value: 1}})

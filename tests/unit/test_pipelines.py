"""Order kinds are declared like job types (issue 41): the steps form a DAG by
construction (a step comes only after steps declared before it), and a kind is one
declarer's."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from portalq.jobs.business import pipelines
from portalq.jobs.errors import InputError


class _Input(BaseModel):
    name: str


def _step(name: str, *after: str) -> pipelines.Step:
    return pipelines.Step(name, "deliver", lambda o, done: {}, after=after)


def test_a_step_comes_only_after_steps_declared_before_it():
    with pytest.raises(InputError, match="step 'a' comes after 'b', which is not a step"):
        pipelines.OrderKind("k", _Input, steps=(_step("a", "b"), _step("b", "a")))
    with pytest.raises(InputError, match="step 'a' twice"):
        pipelines.OrderKind("k", _Input, steps=(_step("a"), _step("a")))
    with pytest.raises(InputError, match="has no steps"):
        pipelines.OrderKind("k", _Input, steps=())
    kind = pipelines.OrderKind("k", _Input, steps=(_step("a"), _step("b", "a"), _step("c")))
    assert [s.name for s in kind.roots()] == ["a", "c"]


def test_the_built_in_kinds_and_their_dags():
    de = pipelines.get("delaware_llc")
    assert [(s.name, s.after) for s in de.steps] == [
        ("file_entity", ()), ("obtain_ein", ("file_entity",)),
        ("deliver", ("file_entity", "obtain_ein"))]
    assert "responsible_party.ssn" in de.secret_fields
    bc = pipelines.get("bc_company")
    assert [(s.name, s.after) for s in bc.steps] == [
        ("name_search", ()), ("file_entity", ("name_search",)), ("deliver", ("file_entity",))]


def test_another_declarer_cannot_replace_a_kind(monkeypatch):
    from portalq.jobs import plugins

    pipelines.get("delaware_llc")   # the built-in kinds loaded
    monkeypatch.setattr(plugins, "current", lambda: "evil_plugin")
    with pytest.raises(InputError, match="'delaware_llc' is already declared"):
        pipelines.register_order_kind(pipelines.OrderKind(
            "delaware_llc", _Input, steps=(_step("a"),)))
    assert pipelines.get("delaware_llc").input_model is not _Input


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(InputError, match=r"unknown order kind 'x' \(known: .*delaware_llc"):
        pipelines.get("x")

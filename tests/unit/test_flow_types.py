"""A flow receives its job type's payload model (issue 40): every built-in flow names, in
``FlowContext[P]``, exactly the model its job type validates payloads with -- ``ctx.args``
is an instance of that model, so a flow typed for another would read fields it lacks."""

from __future__ import annotations

import typing

import pytest

from portalq.jobs import types
from portalq.portals.flows.context import FlowContext

BUILT_IN = ["file_entity", "obtain_ein", "name_search", "process_crtc", "deliver"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_flow_names_its_job_types_payload_model(name):
    job_type = types.get(name)
    flow = job_type.resolve_flow()
    ctx = typing.get_type_hints(flow)["ctx"]
    assert typing.get_origin(ctx) is FlowContext, ctx
    assert typing.get_args(ctx) == (job_type.payload_model,)


def test_every_built_in_job_type_is_checked():
    built_in = {n for n in types.names()
                if types.get(n).flow and str(types.get(n).flow).startswith("portalq.")}
    assert built_in == set(BUILT_IN)

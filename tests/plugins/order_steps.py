"""A test plugin: three small job types on the ``local`` portal and the order kind
``test_llc`` made of them (file -> ein -> deliver, deliver also after file), shaped like
the built-in ``delaware_llc``: the EIN step carries the responsible party's SSN (a secret
field) and the filed entity's name; the delivery names the EIN job's documents.
``test_leaky`` copies the SSN into a non-secret field (refused)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from portalq.jobs import types
from portalq.jobs.business import pipelines


class FilePayload(BaseModel):
    legal_name: str = Field(min_length=1)


class EinPayload(BaseModel):
    legal_name: str = Field(min_length=1)
    file_number: str = Field(min_length=1)
    ssn: str = Field(pattern=r"^\d{3}-\d{2}-\d{4}$")
    note: str | None = None


class DeliverPayload(BaseModel):
    to: str
    source_job_ids: list[int] = Field(min_length=1)


class OrderInput(BaseModel):
    legal_name: str = Field(min_length=1)
    ssn: str = Field(pattern=r"^\d{3}-\d{2}-\d{4}$")
    email: str


for _jt in (types.JobType("os_file", FilePayload, "local", uses_browser=False),
            types.JobType("os_ein", EinPayload, "local", uses_browser=False,
                          secret_fields=("ssn",)),
            types.JobType("os_deliver", DeliverPayload, "local", uses_browser=False)):
    types.register(_jt)

Done = Mapping[str, pipelines.StepResult]


def _file(o: OrderInput, done: Done) -> dict[str, Any]:
    return {"legal_name": o.legal_name}


def _ein(o: OrderInput, done: Done) -> dict[str, Any]:
    filed = done["file"].result
    return {"legal_name": filed["entity_name"], "file_number": filed["file_number"],
            "ssn": o.ssn}


def _deliver(o: OrderInput, done: Done) -> dict[str, Any]:
    return {"to": o.email, "source_job_ids": [done["file"].job_id, done["ein"].job_id]}


pipelines.register_order_kind(pipelines.OrderKind(
    "test_llc", OrderInput,
    steps=(pipelines.Step("file", "os_file", _file),
           pipelines.Step("ein", "os_ein", _ein, after=("file",)),
           pipelines.Step("deliver", "os_deliver", _deliver, after=("file", "ein"))),
    secret_fields=("ssn",)))


def _leaky_file(o: OrderInput, done: Done) -> dict[str, Any]:
    return {"legal_name": f"{o.legal_name} {o.ssn.replace('-', '')}"}


pipelines.register_order_kind(pipelines.OrderKind(
    "test_leaky", OrderInput, steps=(pipelines.Step("file", "os_file", _leaky_file),),
    secret_fields=("ssn",)))

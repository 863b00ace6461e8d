"""Order kinds: an order as a small pipeline of jobs (issue 41).

A formation business sells orders ("a Delaware LLC with an EIN, documents e-mailed"), each a
few jobs on different portals where each needs an earlier one's result. An order kind is
declared like a job type (jobs/types.py), by portalq's own catalogue or by a plugin::

    register_order_kind(OrderKind("delaware_llc", DelawareLlcInput, steps=(
        Step("file_entity", "file_entity", build=lambda order, done: {...}),
        Step("obtain_ein", "obtain_ein", after=("file_entity",),
             build=lambda order, done: {..., "legal_name": done["file_entity"].result[...]}),
        Step("deliver", "deliver", after=("obtain_ein",), build=...),
    ), secret_fields=("responsible_party.ssn",)))

Each step's ``build`` takes the order's validated input (an instance of ``input_model``)
and the results of the steps it comes ``after`` (step name -> :class:`StepResult`); what it
returns is validated by the step's job type like any payload, and the type's secret fields
are sealed as at any enqueue. The order's own ``secret_fields`` must never reach a
non-secret place: a built payload whose stored (non-secret) part holds one of those values
is refused (jobs/business/order_runs.py). Running orders: jobs/business/order_runs.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import time
from typing import Any

from pydantic import BaseModel, ValidationError

from portalq.jobs import plugins
from portalq.jobs.errors import InputError


@dataclass(frozen=True)
class StepResult:
    """A completed step, as the steps after it see it."""

    job_id: int
    result: Mapping[str, Any]


#: a step's payload from the order's input and the results of the steps it comes after
Build = Callable[[Any, Mapping[str, StepResult]], Mapping[str, Any]]


@dataclass(frozen=True)
class Deadline:
    """When a step must be submitted by (issue 41): either a portal's local cut-off on the
    first business date the order could get (``cutoff`` and ``timezone``: Delaware files
    what it receives by 22:30 ET with that day's date), or ``days`` after the step
    ``after`` completed (a name reservation's expiry). ``what`` says it for people."""

    what: str
    cutoff: time | None = None
    timezone: str | None = None
    after: str | None = None
    days: int = 0

    def __post_init__(self) -> None:
        if (self.cutoff is None) == (self.after is None) or (
                self.cutoff is not None and not self.timezone) or (
                self.after is not None and self.days <= 0):
            raise InputError(f"deadline {self.what!r}: give a cutoff with its timezone, or "
                             "a step it comes after with a number of days")


@dataclass(frozen=True)
class Step:
    name: str
    job_type: str
    build: Build
    #: the steps whose completion this one waits for (declared before it: no cycle)
    after: tuple[str, ...] = ()
    #: the portal of a step whose job type picks its portal from the payload (unknown while
    #: the step waits); None: the job type's own
    portal: str | None = None
    #: when the step must be submitted by (a warning when its p90 ETA passes it)
    deadline: Deadline | None = None


@dataclass(frozen=True)
class OrderKind:
    name: str
    input_model: type[BaseModel]
    steps: tuple[Step, ...]
    #: fields of the input that are secrets (dotted paths, ``*`` for list elements): the
    #: input is sealed at rest, and no step may copy one of them into a non-secret field
    secret_fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for step in self.steps:
            if step.name in seen:
                raise InputError(f"order kind {self.name!r}: step {step.name!r} twice")
            unknown = [a for a in step.after if a not in seen]
            if unknown:
                raise InputError(f"order kind {self.name!r}: step {step.name!r} comes after "
                                 f"{unknown[0]!r}, which is not a step declared before it")
            if step.deadline and step.deadline.after and step.deadline.after not in seen:
                raise InputError(f"order kind {self.name!r}: step {step.name!r}'s deadline "
                                 f"counts from {step.deadline.after!r}, not a step before it")
            seen.add(step.name)
        if not self.steps:
            raise InputError(f"order kind {self.name!r} has no steps")

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise InputError(f"order kind {self.name!r} has no step {name!r}")

    def roots(self) -> list[Step]:
        return [s for s in self.steps if not s.after]

    def validate_input(self, data: Any) -> BaseModel:
        if not isinstance(data, Mapping):
            raise InputError(f"{self.name} order input must be a JSON object")
        try:
            return self.input_model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "input"
            raise InputError(
                f"invalid {self.name} order input: {where}: {first['msg']}"
                + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
            ) from None


_KINDS: dict[str, OrderKind] = {}
_OWNERS: dict[str, str | None] = {}


def register_order_kind(kind: OrderKind) -> OrderKind:
    """Declare an order kind (its declarer may declare it again; another may not)."""
    owner = plugins.current()
    if kind.name in _KINDS and _OWNERS.get(kind.name) != owner:
        raise InputError(f"order kind {kind.name!r} is already declared by "
                         f"{_OWNERS.get(kind.name) or 'another module'} (give it another name)")
    _KINDS[kind.name] = kind
    _OWNERS[kind.name] = owner
    return kind


def get(name: str) -> OrderKind:
    plugins.load()
    try:
        return _KINDS[name]
    except KeyError:
        known = ", ".join(sorted(_KINDS)) or "none"
        raise InputError(f"unknown order kind {name!r} (known: {known})") from None


def names() -> list[str]:
    plugins.load()
    return sorted(_KINDS)


__all__ = ["Build", "Deadline", "OrderKind", "Step", "StepResult", "get", "names",
           "register_order_kind"]

"""Job types: one declaration each -- payload schema, portal, secrets, rate limit, flow.

The registry lives with the queue; what a job type *is* (its payload model, its flow) lives
with whoever declares it -- portalq's own portals in :mod:`portals.catalogue`, a plugin in its
own package. One call declares everything::

    class Payload(BaseModel): ...

    register(JobType("renew_license", Payload, portal="state_registry",
                     flow="my_portal.flow:renew_license",      # or the coroutine itself
                     secret_fields=("owner.ssn",)))

Plugins are loaded by the registry itself on its first lookup (:mod:`jobs.plugins`), so every
CLI command, the service and the console know the same job types.
"""

from __future__ import annotations

import importlib
import types as pytypes
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from portalq.jobs import plugins
from portalq.jobs.errors import BusinessError, InputError

#: a flow or handler: ``async def run(ctx) -> dict | None`` (ctx: portals.flows.FlowContext),
#: or returning its job type's result model
Flow = Callable[[Any], Awaitable[Mapping[str, Any] | BaseModel | None]]
#: an order source: the business's order id -> the job's payload (validated like any payload)
OrderSource = Callable[[str], Mapping[str, Any]]


class NoFlow(BusinessError):
    """The job type has no flow on this node: nothing can run it, so it fails at once."""


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` jobs per ``key`` per portal day (the portal's own calendar day)."""

    key: Callable[[Mapping[str, Any]], str]
    limit: int = 1
    period: Literal["portal_day"] = "portal_day"
    #: the limit in words, for an ETA's reasons ("one per responsible party per day")
    words: str = ""


@dataclass(frozen=True)
class JobType:
    name: str
    payload_model: type[BaseModel]
    #: a portal code, or a function of the validated payload giving one
    portal: str | Callable[[BaseModel], str]
    rate_limit: RateLimit | None = None
    #: False: after a crash past the point of no return the portal offers no lookup, so the
    #: job goes to a human instead of back to the queue (e.g. the IRS EIN Assistant)
    reconcilable: bool = True
    #: fields never shown in logs, errors or emails; sealed at rest (jobs/secrets/sealing.py)
    secret_fields: tuple[str, ...] = ()
    #: checkpoint keys whose values are personal data or capabilities: sealed at rest too
    secret_checkpoints: tuple[str, ...] = ()
    #: portals a caller may name instead of :meth:`portal_for`'s (default: none; e.g. a
    #: test or sandbox copy of the portal). Any other explicit portal is an input error:
    #: an EIN request sent to the CRTC would also escape the IRS's per-day limit.
    other_portals: tuple[str, ...] = ()
    #: what runs a job: ``"module:function"`` (imported when a job runs, so enqueueing never
    #: imports a browser) or the coroutine function itself; None: nothing on this node
    flow: str | Flow | None = None
    #: False for flows that need no browser (mail delivery, plain API calls)
    uses_browser: bool = True
    #: the portal account its flow signs in with: a named one, or None for any of the
    #: portal's accounts (jobs spread over them, least recently used first)
    account: str | None = None
    #: builds the payload from the business's order (``portalq enqueue T --order O``);
    #: without one, ``PORTALQ_ORDER_SQL_<TYPE>`` may map orders (jobs/business/orders.py)
    order_source: OrderSource | None = None
    #: True: its flow stops at the portal's review page (``ctx.approve``) before it submits,
    #: so ``PORTALQ_APPROVAL`` may name it (or its portal); a name whose flow never asks is
    #: refused there, rather than filing without the approval the setting promises
    stops_for_approval: bool = False
    #: what its flow returns, as a model: the result is stored as the model's JSON form
    #: (:meth:`stored_result`); None: as the flow returns it
    result_model: type[BaseModel] | None = None

    def stored_result(self, result: Mapping[str, Any] | BaseModel | None
                      ) -> tuple[dict[str, Any] | None, str | None]:
        """What the queue stores of a flow's result, and why it does not fit its model
        (None: it fits, or there is no model).

        A result the model refuses is stored as the flow gave it: the flow's work is done
        (past a submission, a filing), and failing the job over the result's shape would
        send it round again. The refusal names fields and error kinds, never values (a
        result can hold an EIN, a name)."""
        if result is None:
            return None, None
        if isinstance(result, BaseModel):
            return result.model_dump(mode="json"), None
        if self.result_model is None:
            return dict(result), None
        try:
            return self.result_model.model_validate(result).model_dump(mode="json"), None
        except ValidationError as exc:
            fields = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(result)'}: "
                               f"{e['type']}" for e in exc.errors(include_input=False))
            return dict(result), (f"the result of job type {self.name} does not fit "
                                  f"{self.result_model.__name__} ({fields})")

    def portal_for(self, payload: BaseModel) -> str:
        return self.portal(payload) if callable(self.portal) else self.portal

    def choose_portal(self, payload: BaseModel, requested: str | None) -> str:
        """The portal a job goes to: ``requested`` if this type allows it (InputError if
        not), else the type's own for this payload."""
        own = self.portal_for(payload)
        if requested is None or requested == own or requested in self.other_portals:
            return own if requested is None else requested
        allowed = ", ".join((own, *self.other_portals))
        raise InputError(f"{self.name} jobs go to portal {allowed}, not {requested!r}")

    def resolve_flow(self) -> Flow:
        """The coroutine function that runs this type's jobs (:class:`NoFlow` if none)."""
        if self.flow is None:
            raise NoFlow(f"no flow is registered for job type {self.name!r} on this node")
        if callable(self.flow):
            return self.flow
        module, _, func = self.flow.partition(":")
        try:
            return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]
        except (ImportError, AttributeError) as exc:
            raise NoFlow(f"flow {self.flow!r} of job type {self.name!r} cannot be "
                         f"loaded: {exc}") from None


_REGISTRY: dict[str, JobType] = {}
#: who declared each type: the plugin module being loaded then (None: not a plugin)
_OWNERS: dict[str, str | None] = {}


def register(job_type: JobType) -> JobType:
    """Declare a job type (its declarer may declare it again, e.g. a re-imported module).

    Refused (InputError naming the plugin): a type another plugin -- or portalq itself --
    already declared (a plugin declaring ``obtain_ein`` would otherwise replace the built-in
    one and store its SSNs in clear), and a secret field the payload model does not have (a
    typo would leave that secret in clear)."""
    owner = plugins.current()
    if job_type.name in _REGISTRY and _OWNERS.get(job_type.name) != owner:
        before = _OWNERS.get(job_type.name)
        raise InputError(f"job type {job_type.name!r} is already declared by "
                         f"{before or 'another module'}: a plugin cannot replace a job type "
                         "(give it another name)")
    for spec in job_type.secret_fields:
        if not _has_path(job_type.payload_model, spec.split(".")):
            raise InputError(f"secret field {spec!r} of job type {job_type.name!r} is not "
                             f"a field of its payload model {job_type.payload_model.__name__}"
                             " (it would be stored in clear)")
    _REGISTRY[job_type.name] = job_type
    _OWNERS[job_type.name] = owner
    return job_type


def _has_path(annotation: Any, parts: list[str]) -> bool:
    """Whether the dotted path ``parts`` (``*``: every list element) can name a value of
    ``annotation``. Types that cannot be inspected (Any, dict) accept any path."""
    if not parts:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _has_path(typing.get_args(annotation)[0], parts)
    if origin is typing.Union or origin is pytypes.UnionType:
        return any(_has_path(a, parts) for a in typing.get_args(annotation)
                   if a is not type(None))
    head, rest = parts[0], parts[1:]
    if head == "*":
        if isinstance(origin, type) and issubclass(origin, (Sequence, Set)):
            args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
            return _has_path(args[0] if args else Any, rest)
        return annotation is Any or annotation in (list, tuple)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(head)
        return field is not None and _has_path(field.annotation, rest)
    return annotation is Any or origin is dict or annotation is dict or (
        isinstance(origin, type) and issubclass(origin, Mapping))


def set_flow(name: str, flow: str | Flow, *, uses_browser: bool = False) -> JobType:
    """Point an already declared type at another flow (a test double of a portal, a
    handler written apart from its declaration); its declaration is otherwise kept."""
    job_type = replace(get(name), flow=flow, uses_browser=uses_browser)
    _REGISTRY[name] = job_type
    return job_type


def get(name: str) -> JobType:
    # a declared type is final (declaring a name twice is refused), so one found needs no
    # look at the plugins: this runs twice per job, and reading their setting is ~10 µs
    found = _REGISTRY.get(name)
    if found is not None:
        return found
    plugins.load()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise InputError(f"unknown job type {name!r} (known: {known})") from None


def names() -> list[str]:
    plugins.load()
    return sorted(_REGISTRY)


def parse_payload(job_type: str, payload: Any) -> tuple[JobType, BaseModel]:
    """Validate ``payload`` against the type's schema: (type, the payload's model)."""
    jt = get(job_type)
    return jt, validate(jt, payload)


def validate(jt: JobType, payload: Any) -> BaseModel:
    """:func:`parse_payload` for a type already looked up (one registry lookup per job)."""
    if not isinstance(payload, Mapping):
        raise InputError(f"{jt.name} payload must be a JSON object")
    try:
        return jt.payload_model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "payload"
        raise InputError(
            f"invalid {jt.name} payload: {where}: {first['msg']}"
            + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
        ) from None


def normalised(model: BaseModel) -> dict[str, Any]:
    """The payload as stored: JSON types, unset optional fields left out."""
    # model_dump(mode="json", exclude_none=True), without its wrapper's per-call overhead
    out: dict[str, Any] = model.__pydantic_serializer__.to_python(model, mode="json",
                                                                  exclude_none=True)
    return out


def payload_json(model: BaseModel) -> bytes:
    """:func:`normalised` as JSON (UTF-8), serialised by pydantic in one step."""
    return model.__pydantic_serializer__.to_json(model, exclude_none=True)


def validate_payload(job_type: str, payload: Any) -> tuple[JobType, dict[str, Any], str]:
    """Validate ``payload`` against the type's schema: (type, normalised payload, portal)."""
    jt, model = parse_payload(job_type, payload)
    return jt, normalised(model), jt.portal_for(model)


__all__ = ["Flow", "JobType", "NoFlow", "OrderSource", "RateLimit", "register", "set_flow",
           "get", "names", "parse_payload", "validate", "normalised", "payload_json",
           "validate_payload"]

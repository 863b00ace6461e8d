"""portalq: a durable Postgres job queue that drives government portals in their hours.

The public API, for the business's own application and for plugin authors::

    from portalq import enqueue, enqueue_many, NewJob        # in your transaction or not
    from portalq import JobType, register, RetryableError    # a plugin's job type
    from portalq import FlowContext                          # its flow: FlowContext[Payload]
    from portalq.testing import Service, Standin             # its tests (portalq/testing.py)

The repository keeps the design card's layout (``jobs/``, ``scheduler/``, ``portals/``,
``migrations/`` at the top); installed, they are ``portalq.jobs``, ``portalq.scheduler``,
``portalq.portals`` and ``portalq.migrations`` and nothing else enters site-packages. Names
here load on first use (PEP 562), so ``import portalq.jobs.clock`` does not pull in the
database driver, the CLI or Playwright.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it
_EXPORTS = {
    # the queue: enqueue inside the caller's transaction (psycopg or SQLAlchemy) or alone
    "enqueue": "portalq.jobs.queue", "enqueue_many": "portalq.jobs.queue",
    "NewJob": "portalq.jobs.queue", "Enqueued": "portalq.jobs.queue",
    "connect": "portalq.jobs.queue", "get_job": "portalq.jobs.queue",
    "show_job": "portalq.jobs.queue", "list_jobs": "portalq.jobs.queue",
    "cancel": "portalq.jobs.queue", "retry": "portalq.jobs.queue",
    # results back to the app: an order's jobs, a job's status, result and timeline
    "order": "portalq.jobs.business.results", "result": "portalq.jobs.business.results",
    # orders as pipelines: create one (in the caller's transaction or alone), cancel it
    "enqueue_order": "portalq.jobs.business.order_runs",
    "cancel_order": "portalq.jobs.business.order_runs",
    "OrderCreated": "portalq.jobs.business.order_runs",
    # order kinds, for plugins
    "OrderKind": "portalq.jobs.business.pipelines", "Step": "portalq.jobs.business.pipelines",
    "StepResult": "portalq.jobs.business.pipelines",
    "register_order_kind": "portalq.jobs.business.pipelines",
    # job types, for plugins
    "JobType": "portalq.jobs.types", "RateLimit": "portalq.jobs.types",
    "register": "portalq.jobs.types",
    # what a flow raises
    "InputError": "portalq.jobs.errors", "RetryableError": "portalq.jobs.errors",
    "PortalUnavailable": "portalq.jobs.errors", "BusinessError": "portalq.jobs.errors",
    "UncertainOutcome": "portalq.jobs.errors", "DeferUntil": "portalq.jobs.errors",
    # what a flow receives
    "FlowContext": "portalq.portals.flows.context",
}

# spelled out for linters and `import *`; tests/unit/test_namespace.py keeps it equal to _EXPORTS
__all__ = [
    "BusinessError", "DeferUntil", "Enqueued", "FlowContext", "InputError", "JobType", "NewJob",
    "OrderCreated", "OrderKind", "PortalUnavailable", "RateLimit", "RetryableError", "Step",
    "StepResult", "UncertainOutcome", "cancel", "cancel_order", "connect", "enqueue",
    "enqueue_many", "enqueue_order", "get_job", "list_jobs", "order", "register",
    "register_order_kind", "result", "retry", "show_job",
]

if TYPE_CHECKING:
    from portalq.jobs.business.order_runs import OrderCreated, cancel_order, enqueue_order
    from portalq.jobs.business.pipelines import OrderKind, Step, StepResult, register_order_kind
    from portalq.jobs.business.results import order, result
    from portalq.jobs.errors import (
        BusinessError,
        DeferUntil,
        InputError,
        PortalUnavailable,
        RetryableError,
        UncertainOutcome,
    )
    from portalq.jobs.queue import (
        Enqueued,
        NewJob,
        cancel,
        connect,
        enqueue,
        enqueue_many,
        get_job,
        list_jobs,
        retry,
        show_job,
    )
    from portalq.jobs.types import JobType, RateLimit, register
    from portalq.portals.flows.context import FlowContext


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'portalq' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])

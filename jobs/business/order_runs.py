"""Running orders (issue 41): create an order's jobs at once, release each step when the
steps before it completed, cancel what has not run.

- :func:`enqueue_order`, in the caller's transaction (or one of portalq's own): the order's
  input is validated by its kind's model and every first step's payload by its job type
  before anything is written; then one transaction writes the order, its first steps as
  pending jobs, and every later step as a *held* job -- ``deferred`` to :data:`HELD_UNTIL`
  with an empty payload. The claim's index range stops at ``run_at <= now``, so a held job
  costs the claim nothing and is never claimed: no new status, no change to the claim.
- The completion of a step (``complete_many``, the statement every worker's completions
  go through) says which order it belongs to; :func:`arelease_ready` then builds the
  payloads of that order's held steps whose predecessors all completed, from the order's
  input (sealed at rest, opened only here) and the predecessors' results, validates and
  seals them like any enqueue, and makes those jobs pending, in one transaction. Should a
  node die between the two, the leader's sweep (:func:`arelease_held`) releases them.
- A failed or escalated step is not completed: the steps after it stay held (they spend
  nothing) until a person retries it and it completes.
- :func:`cancel_order` cancels the order's jobs that have not run (pending, deferred, held);
  a running one runs on (it may be filing), a failed one is left to a person, and a waiting
  one whose submission reached its portal (a registry that decides later) is left to
  finish: cancelling it would only lose track of a filing.

An order's sealed input is erased once no step waits for it (crypto-shredding, as a job's
secrets go with its completion).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection

from portalq.jobs import clock, enqueue, limits, types
from portalq.jobs.business import pipelines
from portalq.jobs.db import sql
from portalq.jobs.db.txn import use as _use
from portalq.jobs.errors import IllegalTransition, InputError, JobNotFound
from portalq.jobs.secrets import crypto, key_registry, sealing

log = logging.getLogger(__name__)

#: a held step's run_at: beyond any claim's now
HELD_UNTIL = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class OrderCreated:
    order_id: str
    kind: str
    #: step name -> its job's id
    jobs: dict[str, int]
    #: the steps pending now (the others are held)
    started: tuple[str, ...]


@contextlib.contextmanager
def _atomic(c: psycopg.Connection[Any]) -> Iterator[None]:
    """All or nothing, inside the caller's transaction if there is one: on a connection
    that is not autocommit (the caller's, or a SQLAlchemy session's) a savepoint -- its
    ``transaction()`` would commit the caller's work when none is open yet."""
    if c.autocommit:
        with c.transaction():
            yield
        return
    c.execute("SAVEPOINT portalq_order")
    try:
        yield
    except BaseException:
        c.execute("ROLLBACK TO SAVEPOINT portalq_order")
        raise
    c.execute("RELEASE SAVEPOINT portalq_order")


def _aad(order_id: str) -> bytes:
    return f"portalq:orders.input:{order_id}".encode()


def _secret_values(kind: pipelines.OrderKind, normal: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, value) of the order's secret fields that hold a value."""
    out = []
    for spec in kind.secret_fields:
        for path, parent, key in sealing.walk_paths(normal, spec.split("."), ""):
            value = parent.get(key) if isinstance(parent, dict) else None
            if isinstance(value, str) and len(value.strip()) >= 4:
                out.append((path, value.strip()))
    return out


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def _check_not_copied(kind: pipelines.OrderKind, step: pipelines.Step, stored: str,
                      secrets: Sequence[tuple[str, str]]) -> None:
    """Refuse a step payload whose stored (non-secret) part holds a secret of the order,
    as given or as its digits alone (an SSN rewritten without its dashes)."""
    if not secrets:
        return
    texts = _strings(json.loads(stored))
    digits = [re.sub(r"\D", "", t) for t in texts]
    for path, value in secrets:
        bare = re.sub(r"\D", "", value)
        if any(value in t for t in texts) or (
                len(bare) >= 6 and any(bare in d for d in digits)):
            raise InputError(f"order kind {kind.name}: step {step.name} would store the "
                             f"order's secret {path} in a field its job type "
                             f"{step.job_type} does not keep secret")


def _step_row(kind: pipelines.OrderKind, step: pipelines.Step, order_id: str,
              payload: Any, secrets: Sequence[tuple[str, str]], priority: int,
              max_attempts: int) -> dict[str, Any]:
    """The step's validated job row (enqueue's checks, its secrets taken out, not sealed)."""
    job = enqueue.NewJob(step.job_type, order_id, payload, priority=priority,
                         max_attempts=max_attempts, portal=step.portal)
    row = enqueue._validate(job, limits.max_payload_bytes(), {})
    _check_not_copied(kind, step, row["payload"], secrets)
    return row


def _build(kind: pipelines.OrderKind, step: pipelines.Step, model: Any,
           done: Mapping[str, pipelines.StepResult]) -> Any:
    try:
        return step.build(model, done)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the declaration's failure, said in one line
        raise InputError(f"order kind {kind.name}: step {step.name} could not build its "
                         f"payload: {type(exc).__name__}") from None


def _held_portal(step: pipelines.Step) -> str:
    jt = types.get(step.job_type)
    portal = step.portal if step.portal is not None else jt.portal
    if not isinstance(portal, str):
        raise InputError(f"step {step.name}: job type {step.job_type} picks its portal from "
                         "its payload; the step must name one (Step(portal=...))")
    return portal


def enqueue_order(kind_name: str, order_id: str, data: Any, conn: Any = None, *,
                  priority: int = 0, max_attempts: int = 5) -> OrderCreated:
    """Create the order ``order_id`` of kind ``kind_name`` with input ``data``: its first
    steps pending, the others held, all or nothing (InputError, nothing written: an
    unknown kind, an invalid input or first payload, an order id already used)."""
    kind = pipelines.get(kind_name)
    order_id = limits.check_identifier(order_id, "order id", limits.MAX_ORDER_ID)
    priority = limits.check_int(priority, "priority", -100, 100)
    max_attempts = limits.check_int(max_attempts, "max attempts", 1, 100)
    if isinstance(data, Mapping):
        limits.check_payload_strings(data, "order input")
    model = kind.validate_input(data)
    normal = types.normalised(model)
    secrets = _secret_values(kind, normal)
    roots = kind.roots()
    for step in roots:   # validated before anything is written
        _step_row(kind, step, order_id, _build(kind, step, model, {}), secrets, priority,
                  max_attempts)
    later = [s for s in kind.steps if s.after]
    portals = {s.name: limits.check_identifier(_held_portal(s), "portal", 100) for s in later}
    key_id: str | None = None
    blob: bytes | None = None
    if later:   # the input is read again when a later step is released
        key_id, blob = crypto.seal_blob(json.dumps(normal).encode(), aad=_aad(order_id))
    with _use(conn) as c, _atomic(c):
        now = clock.now()
        if sql.fetch_value(c, "order_insert", {"order_id": order_id, "kind": kind.name,
                                               "now": now, "key_id": key_id,
                                               "data": blob}) is None:
            raise InputError(f"order {order_id!r} already exists")
        if blob is not None:
            key_registry.note(c, crypto.provider())
        first = enqueue.enqueue_many(
            [enqueue.NewJob(s.job_type, order_id, _build(kind, s, model, {}),
                            priority=priority, max_attempts=max_attempts, portal=s.portal)
             for s in roots], conn=c)
        ids = {s.name: e.id for s, e in zip(roots, first, strict=True)}
        for s in later:
            new_id = sql.fetch_value(c, "order_insert_held", {
                "job_type": s.job_type, "order_id": order_id, "portal": portals[s.name],
                "priority": priority, "held": HELD_UNTIL, "max_attempts": max_attempts,
                "waiting": f"waiting for {', '.join(s.after)} (order {order_id})",
                "now": now})
            if new_id is None:
                raise InputError(f"unknown portal {portals[s.name]!r}")
            ids[s.name] = new_id
        steps = list(kind.steps)
        sql.fetch(c, "order_insert_steps", {
            "order_id": order_id, "steps": [s.name for s in steps],
            "job_ids": [ids[s.name] for s in steps],
            "after": [" ".join(s.after) for s in steps],
            "held": [bool(s.after) for s in steps]})
    return OrderCreated(order_id, kind.name, ids, tuple(s.name for s in roots))


def _releases(ready: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]],
              ) -> list[tuple[str, dict[str, Any]]]:
    """The statement (and its parameters) for each ready step: its release with the payload
    built, or, when that payload cannot be built, its failure for a person."""
    done: dict[str, dict[str, pipelines.StepResult]] = {}
    for r in results:
        done.setdefault(r["order_id"], {})[r["step"]] = pipelines.StepResult(
            r["job_id"], r["result"] or {})
    out: list[tuple[str, dict[str, Any]]] = []
    for row in ready:
        try:
            out.append(("order_release_step", _release_params(row, done)))
        except InputError as exc:
            out.append(("order_step_unbuildable", {
                "id": row["job_id"], "error": f"order step not started: {exc}"[:1000]}))
    return out


def _release_params(row: Mapping[str, Any],
                    done: Mapping[str, Mapping[str, pipelines.StepResult]]) -> dict[str, Any]:
    kind = pipelines.get(row["kind"])
    step = kind.step(row["step"])
    if row["input_data"] is None:
        raise InputError(f"the input of order {row['order_id']} was erased")
    data = json.loads(crypto.open_blob(row["input_key_id"], bytes(row["input_data"]),
                                       aad=_aad(row["order_id"])))
    model = kind.validate_input(data)
    before = {name: res for name, res in done.get(row["order_id"], {}).items()
              if name in step.after}
    job = _step_row(kind, step, row["order_id"], _build(kind, step, model, before),
                    _secret_values(kind, types.normalised(model)), row["priority"], 5)
    job["id"] = row["job_id"]
    sealing.seal_rows([job])
    return {k: job[k] for k in ("id", "payload", "portal", "rate_key", "secret_key_id",
                                "secret_dek", "secret_data")}


def release_ready(order_ids: Sequence[str], conn: Any = None) -> list[int]:
    """Release the held steps of ``order_ids`` whose predecessors all completed (the ids
    of the jobs made pending)."""
    if not order_ids:
        return []
    with _use(conn) as c, _atomic(c):
        now = clock.now()
        ready = sql.fetch(c, "order_ready_steps", {"orders": list(order_ids),
                                                   "held": HELD_UNTIL, "limit": 10_000})
        if not ready:
            return []
        orders = sorted({r["order_id"] for r in ready})
        results = sql.fetch(c, "order_step_results", {"orders": orders})
        released = []
        for name, params in _releases(ready, results):
            got = sql.fetch_value(c, name, {**params, "now": now, "held": HELD_UNTIL})
            if got is not None and name == "order_release_step":
                released.append(int(got))
        sql.fetch(c, "order_erase_input", {"orders": orders, "now": now})
        if released:
            sql.fetch(c, "notify", {"reason": "order"})
        return released


async def arelease_ready(conn: AsyncConnection[Any], order_ids: Sequence[str] | None,
                         limit: int = 10_000) -> list[int]:
    """:func:`release_ready` on a worker's async connection (``order_ids`` None: any
    order's, at most ``limit`` steps)."""
    if order_ids is not None and not order_ids:
        return []
    async with conn.transaction():
        now = clock.now()
        ready = await sql.afetch(conn, "order_ready_steps", {
            "orders": list(order_ids) if order_ids is not None else None,
            "held": HELD_UNTIL, "limit": limit})
        if not ready:
            return []
        orders = sorted({r["order_id"] for r in ready})
        results = await sql.afetch(conn, "order_step_results", {"orders": orders})
        released = []
        for name, params in _releases(ready, results):
            got = await sql.afetch_one(conn, name, {**params, "now": now, "held": HELD_UNTIL})
            if got is not None and name == "order_release_step":
                released.append(int(got["id"]))
        await sql.afetch(conn, "order_erase_input", {"orders": orders, "now": now})
        if released:
            await sql.afetch(conn, "notify", {"reason": "order"})
        return released


async def arelease_held(conn: AsyncConnection[Any], limit: int = 500) -> list[int]:
    """The leader's sweep: release what a crash between a step's completion and its
    release left held."""
    return await arelease_ready(conn, None, limit)


def cancel_order(order_id: str, *, reason: str, actor: str = "cli",
                 conn: Any = None) -> list[int]:
    """Cancel the order's jobs that have not run; the ids cancelled. JobNotFound: no such
    order; IllegalTransition: cancelled already."""
    order_id = limits.check_identifier(order_id, "order id", limits.MAX_ORDER_ID)
    reason = limits.check_identifier(reason, "reason", 500)
    with _use(conn) as c, _atomic(c):
        row = sql.fetch_one(c, "order_cancel", {
            "order_id": order_id, "reason": reason, "now": clock.now(), "actor": actor,
            "error": f"order cancelled: {reason}"})
        if row is None or not row["found"]:
            if sql.fetch_one(c, "order_get", {"order_id": order_id}) is None:
                raise JobNotFound(f"no order {order_id!r}")
            raise IllegalTransition(f"order {order_id!r} is cancelled already")
        return list(row["cancelled"])


def order_steps(order_id: str, conn: Any = None) -> list[dict[str, Any]]:
    """The order's steps in creation order: step, job id, job type, status, held..."""
    with _use(conn) as c:
        return [dict(r) for r in sql.fetch(c, "order_steps_of", {"order_id": order_id})]


__all__ = ["HELD_UNTIL", "OrderCreated", "arelease_held", "arelease_ready", "cancel_order",
           "enqueue_order", "order_steps", "release_ready"]

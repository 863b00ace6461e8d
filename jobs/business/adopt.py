"""Taking over the business's old queue: ``portalq adopt``.

A business that moves to portalq usually has a queue of its own, a ``job_queue`` table
(``id``, ``job_type``, ``payload``, ``status``, ``attempts``, ``last_error``, ``run_at``,
``order_id`` ...) with jobs still waiting in it. Each of its rows becomes:

- pending or deferred: a portalq job, its payload built by the job type's order source from
  the row's ``order_id`` where the type has one (jobs/business/orders.py), else the row's payload;
  validated and sealed by the normal enqueue (jobs/enqueue.py);
- running: a failed job with an "uncertain" escalation and a submission in doubt
  (jobs/submission.py). The old dispatcher may have been mid-filing: such a job must never
  run by itself; a person checks the portal, then ``jobs retry --not-filed`` or
  ``--confirmed-filed``;
- failed: a failed job with the row's last error (the job's secrets scrubbed from it);
- finished (done, completed, cancelled ...): counted, nothing imported;
- anything else (an unknown job type or status, no order id, an invalid payload): skipped,
  with the reason.

A pending row held far ahead (``run_at`` past portalq's ten-year horizon, e.g. 9999-12-31:
a hold, not a time) is skipped with the reason, never made due at once.

Each job's idempotency key is ``legacy:<schema>.<table>:<id>``: a second run imports
nothing twice. The legacy table is read a batch at a time (a server-side cursor in a
read-only transaction of a connection of its own: 150 MB of payloads took 358 MB of
memory when it was read at once). The whole import is one transaction of portalq's: a
running row never exists as a pending job another node could claim, and an error leaves
nothing written.

The legacy rows' secret fields (SSNs, ITINs) stay in plaintext in the old table: the report
says how many rows hold them, and ``blank`` (``portalq adopt --blank-secrets``, a separate
run once the import is verified) empties them in the rows that were imported into portalq,
and only there -- the one write into the old table.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql as pgsql
from psycopg.types.json import Jsonb

from portalq.jobs import clock, limits, queue, submission, types
from portalq.jobs.business.orders import order_query, payload_for_order
from portalq.jobs.db import sql
from portalq.jobs.db.location import schema as portalq_schema
from portalq.jobs.errors import BatchInputError, InputError
from portalq.jobs.kinds import EscalationKind
from portalq.jobs.secrets import redaction, sealing

DEFAULT_TABLE = "public.job_queue"
#: the columns a legacy queue must have (others, e.g. portal_tz, portal_hours, order_type,
#: are not needed: portalq's own portal calendars decide when a job may run)
COLUMNS = ("id", "job_type", "payload", "status", "attempts", "last_error", "run_at",
           "order_id")

WAITING = frozenset({"pending", "deferred"})
RUNNING = frozenset({"running"})
FAILED = frozenset({"failed"})
FINISHED = frozenset({"done", "completed", "complete", "succeeded", "success", "cancelled",
                      "canceled"})

#: the name of the submission in doubt a running row's job is given: ``jobs retry
#: --not-filed`` / ``--confirmed-filed`` resolve it like any other
SUBMISSION = "legacy"
UNCERTAIN = ("the old queue had it running when it was taken over: it may have been filed. "
             "Check the portal, then --confirmed-filed or --not-filed; do not cancel or "
             "retry blindly")
#: a legacy error is kept up to this many characters
MAX_ERROR = 2000
#: legacy rows read (and planned, and imported) at a time
BATCH = 200
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class Table:
    schema: str
    name: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"

    def key(self, row_id: int) -> str:
        return f"legacy:{self}:{row_id}"


def parse_table(text: str) -> Table:
    """``schema.name`` or ``name`` (in ``public``): plain identifiers, as stored."""
    parts = text.split(".")
    if len(parts) == 1:
        parts = ["public", *parts]
    if len(parts) != 2 or not all(_IDENT.fullmatch(p) for p in parts):
        raise InputError(f"--table {text!r}: give schema.name (plain identifiers)")
    table = Table(parts[0], parts[1])
    if table.schema == portalq_schema():
        raise InputError(f"--table {table}: that is portalq's own schema, not a legacy queue")
    return table


@dataclass
class LegacyRow:
    id: int
    job_type: str
    payload: Any
    status: str
    attempts: int | None
    last_error: str | None
    run_at: datetime | None
    order_id: str | None


@dataclass
class Plan:
    """What one legacy row becomes."""

    row: LegacyRow
    kind: str              # "waiting" | "running" | "failed" | "finished" | "skip"
    job_type: str = ""     # portalq's job type (after --map-type)
    reason: str = ""       # a skipped row's
    job: queue.NewJob | None = None
    job_id: int | None = None      # the portalq job (once imported, or found imported)
    existed: bool = False          # imported by an earlier run
    secrets: list[str] = field(default_factory=list)
    portal: str = ""
    #: the secret fields (paths) the legacy row's own payload holds in plaintext
    plaintext: tuple[str, ...] = ()
    blanked: bool = False          # they were emptied in the old table (blank)

    @property
    def imports(self) -> bool:
        return self.kind in ("waiting", "running", "failed")


def stream(conn: psycopg.Connection[Any], table: Table,
           batch: int = BATCH) -> Iterator[list[LegacyRow]]:
    """The legacy table's rows, ``batch`` at a time, from a server-side cursor in a
    read-only transaction of ``conn`` -- a connection of their own, not the import's
    (InputError when there is no such table or it lacks a column of the shape)."""
    conn.read_only = True
    try:
        with conn.transaction():
            found = sql.fetch_one(conn, "adopt_legacy_table",
                                  {"schema": table.schema, "name": table.name})
            if found is None:
                raise InputError(f"no table {table} (give --table schema.name)")
            have = set(found["columns"] or ())
            missing = [c for c in COLUMNS if c not in have]
            if missing:
                raise InputError(f"{table} is not a legacy job queue: no column "
                                 f"{', '.join(missing)} (needs {', '.join(COLUMNS)})")
            text = pgsql.SQL(sql.query("adopt_legacy_rows")).format(
                table=pgsql.Identifier(table.schema, table.name))
            with conn.cursor(name="portalq_adopt") as cur:
                cur.itersize = batch
                cur.execute(text)
                while fetched := cur.fetchmany(batch):
                    try:
                        rows = [_row(r) for r in fetched]
                    except (TypeError, ValueError):
                        raise InputError(f"{table} is not a legacy job queue: its id is not "
                                         "an integer") from None
                    yield rows
    finally:
        conn.read_only = False


def _row(r: Sequence[Any]) -> LegacyRow:
    row_id, job_type, payload, status, attempts, last_error, run_at, order_id = r
    if isinstance(row_id, bool):
        raise TypeError("a boolean id")
    if isinstance(run_at, datetime) and run_at.tzinfo is None:
        run_at = run_at.replace(tzinfo=UTC)   # a timestamp without zone: read as UTC
    elif not isinstance(run_at, datetime):
        run_at = None
    return LegacyRow(int(row_id), str(job_type or ""), payload,
                     str(status or "").strip().lower(),
                     attempts if isinstance(attempts, int) else None,
                     None if last_error is None else str(last_error), run_at,
                     None if order_id is None else str(order_id))


def _kind(status: str) -> str | None:
    for kind, words in (("waiting", WAITING), ("running", RUNNING), ("failed", FAILED),
                        ("finished", FINISHED)):
        if status in words:
            return kind
    return None


def plan(rows: Sequence[LegacyRow], table: Table, conn: psycopg.Connection[Any],
         type_map: Mapping[str, str] | None = None) -> list[Plan]:
    """Each row's fate, every payload built and validated (nothing written). ``conn``:
    portalq's database, where earlier imports are looked up by their keys."""
    type_map = type_map or {}
    now = clock.now()
    out = [_plan_one(r, table, type_map, now) for r in rows]
    wanted = sorted({p.portal for p in out if p.job})
    known = {r["code"] for r in sql.fetch(conn, "portals_named", {"codes": wanted})}
    for p in out:
        if p.job and p.portal not in known:   # the enqueue would refuse the whole import
            p.kind, p.job = "skip", None
            p.reason = f"unknown portal {p.portal!r} (none such in portalq)"
    keys = {p.job.idempotency_key: p for p in out if p.job and p.job.idempotency_key}
    if keys:
        for hit in sql.fetch(conn, "ids_by_idempotency_key", {"keys": list(keys)}):
            p = keys[hit["idempotency_key"]]
            if hit["job_type"] != p.job_type:   # a --map-type changed since, or a key of
                p.kind, p.job = "skip", None    # the business's own: never a second job
                p.reason = (f"its key {hit['idempotency_key']} is taken by job {hit['id']}, "
                            f"a {hit['job_type']} job")
            else:
                p.job_id, p.existed = hit["id"], True
    return out


def _plan_one(row: LegacyRow, table: Table, type_map: Mapping[str, str],
              now: datetime) -> Plan:
    p = _fate(row, table, type_map, now)
    p.plaintext = tuple(path for path, _, _ in _secret_places(
        type_map.get(row.job_type, row.job_type), _legacy_payload(row)))
    return p


def _fate(row: LegacyRow, table: Table, type_map: Mapping[str, str],
          now: datetime) -> Plan:
    kind = _kind(row.status)
    if kind is None:
        return Plan(row, "skip", reason=f"unknown status {row.status!r}")
    job_type = type_map.get(row.job_type, row.job_type)
    if kind == "finished":
        return Plan(row, kind, job_type)
    try:
        jt = types.get(job_type)
    except InputError:
        return Plan(row, "skip", job_type, reason=f"unknown job type {job_type!r} (map it "
                    "with --map-type OLD=NEW)")
    if not row.order_id:
        return Plan(row, "skip", job_type, reason="no order id")
    try:
        order_id = limits.check_identifier(row.order_id, "order id", limits.MAX_ORDER_ID)
        payload = _payload(jt, row)
        limits.check_payload_strings(payload)
        model = types.validate(jt, payload)
        portal = jt.choose_portal(model, None)
    except InputError as exc:
        return Plan(row, "skip", job_type, reason=str(exc))
    # a deferred row waited for its run_at: kept when it is still ahead (a past one is now)
    run_at = row.run_at if kind == "waiting" and row.run_at and row.run_at > now else None
    try:
        limits.check_run_at(run_at)
    except InputError:
        # far ahead (9999-12-31 is a legacy app's "hold"): never made due at once
        assert run_at is not None
        return Plan(row, "skip", job_type, reason=(
            f"run at {run_at:%Y-%m-%d}, more than ten years ahead (a hold?): give it a "
            "real run_at in the old table, or enqueue it when it is due"))
    job = queue.NewJob(job_type, order_id, payload, run_at=run_at,
                       idempotency_key=table.key(row.id))
    return Plan(row, kind, job_type, job=job, portal=portal,
                secrets=redaction.secret_values(job_type, types.normalised(model)))


def _payload(jt: types.JobType, row: LegacyRow) -> dict[str, Any]:
    """By the type's order source where it has one, else the row's own payload."""
    if jt.order_source is not None or order_query(jt.name):
        return payload_for_order(jt.name, row.order_id or "")
    payload = row.payload
    if isinstance(payload, str | bytes):
        try:
            payload = json.loads(payload)
        except ValueError:
            raise InputError("the legacy payload is not JSON") from None
    if not isinstance(payload, Mapping):
        raise InputError("the legacy payload is not a JSON object")
    return dict(payload)


def _legacy_payload(row: LegacyRow) -> Any:
    """The row's own payload as JSON (None when it is not JSON)."""
    if isinstance(row.payload, str | bytes):
        try:
            return json.loads(row.payload)
        except ValueError:
            return None
    return row.payload


def _secret_places(job_type: str, payload: Any) -> Iterator[tuple[str, Any, str]]:
    """(path, parent, key) of each secret field of ``job_type`` holding a value in
    ``payload`` (the old table's plaintext)."""
    for spec in redaction.secret_fields(job_type):
        for path, parent, key in sealing.walk_paths(payload, spec.split("."), ""):
            if parent[key] not in (None, ""):
                yield path, parent, key


def blank(plans: Sequence[Plan], table: Table, conn: psycopg.Connection[Any]) -> None:
    """Empty the plaintext secret fields, in the old table, of the rows that were imported
    into portalq (found there by their keys); in ``conn``'s transaction (the caller
    commits). Rows not imported keep theirs: nothing else holds their data."""
    text = pgsql.SQL(sql.query("adopt_blank_secrets")).format(
        table=pgsql.Identifier(table.schema, table.name))
    for p in plans:
        if not (p.imports and p.existed and p.plaintext):
            continue
        payload = _legacy_payload(p.row)
        for _path, parent, key in list(_secret_places(p.job_type, payload)):
            parent[key] = ""
        with conn.cursor() as cur:
            # as text: PostgreSQL casts it to the column's own type (jsonb, json or text)
            cur.execute(text, {"id": p.row.id, "payload": json.dumps(payload)})
        p.blanked, p.plaintext = True, ()


def apply(plans: Sequence[Plan], table: Table, conn: psycopg.Connection[Any]) -> None:
    """Import the plans' jobs in ``conn``'s transaction (the caller commits): enqueued
    with their keys, then the running and failed ones failed in the same transaction."""
    todo = [p for p in plans if p.imports and p.job is not None]
    if not todo:
        return
    jobs = [p.job for p in todo if p.job is not None]
    try:
        done = queue.enqueue_many(jobs, conn)
    except InputError as exc:   # the plan checked each; refused now (e.g. an unknown portal)
        if isinstance(exc, BatchInputError):
            raise InputError(f"row {todo[exc.index].row.id}: {exc.detail}") from None
        if len(todo) == 1:
            raise InputError(f"row {todo[0].row.id}: {exc}") from None
        raise
    now = clock.now()
    for p, got in zip(todo, done, strict=True):
        p.job_id, p.existed = got.id, not got.created
        if p.existed or p.kind == "waiting":
            continue
        detail: dict[str, Any] = {"event": "adopted", "from": f"{table}#{p.row.id}",
                                  "legacy_status": p.row.status}
        if p.kind == "running":
            error = f"taken over from {table} row {p.row.id} while running there"
            checkpoint = submission.started({}, SUBMISSION, table.key(p.row.id), now)
        else:
            legacy = (p.row.last_error or "").strip() or "(no error recorded)"
            error = redaction.scrub(f"failed in {table} (row {p.row.id}): {legacy}",
                                  p.secrets)[:MAX_ERROR]
            checkpoint = {}
        if p.row.attempts is not None:
            detail["legacy_attempts"] = p.row.attempts
        sql.fetch(conn, "adopt_failed", {"id": p.job_id, "now": now, "error": error,
                                         "checkpoint": Jsonb(checkpoint),
                                         "detail": Jsonb(detail)})
        if p.kind == "running":
            queue.escalate(conn, p.job_id, 0, EscalationKind.UNCERTAIN,
                           f"taken over from {table} row {p.row.id}: {UNCERTAIN}")


# -- the report -------------------------------------------------------------------------------
_BECOMES = {"waiting": "a pending job", "running": "a failed job waiting for a person "
            "(it may have been filed: escalated as uncertain)",
            "failed": "a failed job with its last error"}


def line(p: Plan, applied: bool) -> str:
    """One row's line of the report (no payload value, no error text: they may be
    personal)."""
    head = f"row {p.row.id} {_show(p.row.status) or '(no status)'} " + (
        _show(p.row.job_type) or "?") + (
        f" -> {_show(p.job_type)}" if p.job_type and p.job_type != p.row.job_type else "") + (
        f" {_show(p.row.order_id)}" if p.row.order_id else "")
    if p.kind == "skip":
        return f"{head}: skipped: {p.reason}"
    if p.kind == "finished":
        return f"{head}: finished, counted"
    if p.existed:
        return f"{head}: already imported as job {p.job_id}" + (
            "; its secret fields blanked in the old table" if p.blanked else "")
    when = (f", run at {p.job.run_at.isoformat()}" if p.job and p.job.run_at
            and p.kind == "waiting" else "")
    if applied:
        return f"{head}: imported as job {p.job_id}, {_BECOMES[p.kind]}{when}"
    return f"{head}: would become {_BECOMES[p.kind]}{when}"


def _show(text: str | None) -> str:
    """A legacy value on one line of the report: no control character, at most 80."""
    shown = _CONTROL.sub("?", text or "")
    return shown if len(shown) <= 80 else shown[:79] + "…"


@dataclass
class Tally:
    """The report's counts, added up batch by batch (no row kept)."""

    rows: int = 0
    new: Counter[str] = field(default_factory=Counter)
    existed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    plaintext: int = 0                   # rows whose payload holds a secret in plaintext
    plaintext_kept: int = 0              # ... of rows not imported (nothing blanks them)
    fields: set[str] = field(default_factory=set)
    blanked: int = 0

    def add(self, p: Plan) -> None:
        self.rows += 1
        self.kinds[p.kind] += 1
        if p.imports:
            if p.existed:
                self.existed += 1
            else:
                self.new[p.row.status] += 1
        self.blanked += p.blanked
        if p.plaintext:
            self.plaintext += 1
            self.plaintext_kept += not p.imports
            self.fields.update(re.sub(r"\.\d+\.", ".*.", f) for f in p.plaintext)


def summary(t: Tally, mode: str, table: Table) -> list[str]:
    """The report's last lines; ``mode``: "dry" | "apply" | "blank"."""
    n_new = sum(t.new.values())
    parts = ", ".join(f"{s} {n}" for s, n in sorted(t.new.items()))
    verb = "imported" if mode == "apply" else "to import"
    text = (f"{t.rows} rows: {verb} {n_new}" + (f" ({parts})" if parts else "")
            + f", already imported {t.existed}"
            + f", finished {t.kinds['finished']}, skipped {t.kinds['skip']}")
    if mode == "dry":
        text += "; dry run, nothing written (--apply imports)"
    out = []
    if t.plaintext:
        where = "" if str(table) == DEFAULT_TABLE else f" --table {table}"
        out.append(
            f"{t.plaintext} rows of {table} hold secret fields in plaintext "
            f"({', '.join(sorted(t.fields))}); the old table is left as it was. Once the "
            f"import is verified, blank them there: portalq adopt --blank-secrets{where}"
            + (f" (it blanks only rows imported into portalq: {t.plaintext_kept} of these "
               "are not)" if t.plaintext_kept else ""))
    out.append(text)
    if mode == "blank":
        out.append(f"blanked the secret fields of {t.blanked} rows (only rows imported "
                   "into portalq)")
    return out

"""Key rotation: re-wrap the stored data keys under the current KEK, in small batches (each
its own short transaction, rows locked with SKIP LOCKED), while the service runs.

The data itself is never re-encrypted: only each job's (and document's) data key, a few
dozen bytes. Once :func:`usage` shows no row naming an old KEK, that key can be deleted
(:func:`retire`); every copy of the database taken before (dumps, WAL, backups) is then
unreadable.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from portalq.jobs import types
from portalq.jobs.db import sql, txn
from portalq.jobs.errors import IllegalTransition
from portalq.jobs.secrets import crypto, key_registry, sealing

BATCH = 500


@dataclass
class RewrapReport:
    current: str
    jobs: int = 0
    documents: int = 0
    webhook_secrets: int = 0
    order_inputs: int = 0
    checkpoints: int = 0
    legacy_sealed: int = 0
    bound: int = 0
    left: dict[str, int] | None = None


def usage(conn: Any) -> dict[str, int]:
    """Stored values per KEK id."""
    return {r["key_id"]: r["n"] for r in sql.fetch(conn, "key_usage")}


def _pass(connect: Callable[[], Any], p: crypto.KeyProvider, report: RewrapReport,
          batch: int) -> None:
    for select, update, column in (("sealed_rows", "rewrap_rows", "jobs"),
                                   ("sealed_documents", "rewrap_documents", "documents"),
                                   ("sealed_webhook_secrets", "rewrap_webhook_secrets",
                                    "webhook_secrets")):
        after = 0
        while True:
            with connect() as c:   # one short transaction per batch
                rows = sql.fetch(c, select, {"after": after, "current": report.current,
                                             "limit": batch})
                if not rows:
                    break
                if column == "jobs":
                    new = [crypto.rewrap(r["secret_key_id"], r["secret_dek"], p) for r in rows]
                    sql.fetch(c, update, {
                        "ids": [r["id"] for r in rows],
                        "old": [r["secret_key_id"] for r in rows],
                        "key_ids": [n[0] for n in new], "deks": [n[1] for n in new]})
                else:
                    new = [crypto.rewrap_blob(r["key_id"], r["data"], p) for r in rows]
                    sql.fetch(c, update, {
                        "ids": [r["id"] for r in rows], "old": [r["key_id"] for r in rows],
                        "key_ids": [n[0] for n in new], "datas": [n[1] for n in new]})
                after = rows[-1]["id"]
                setattr(report, column, getattr(report, column) + len(rows))
    _order_inputs(connect, p, report, batch)
    after = 0
    while True:   # sealed checkpoint values
        with connect() as c:
            rows = sql.fetch(c, "sealed_checkpoints", {"after": after, "current": report.current,
                                                       "limit": batch})
            if not rows:
                break
            for r in rows:
                patch = {k: sealing.rekey_checkpoint_value(r["id"], r["job_type"], k,
                                                                   v, p)
                         for k, v in r["checkpoint"].items()
                         if isinstance(v, str) and v.startswith(sealing.CHECKPOINT_PREFIX)}
                sql.fetch(c, "rewrap_checkpoint", {"id": r["id"], "patch": json.dumps(patch)})
            after = rows[-1]["id"]
            report.checkpoints += len(rows)


def _order_inputs(connect: Callable[[], Any], p: crypto.KeyProvider, report: RewrapReport,
                  batch: int) -> None:
    """Orders' sealed inputs (issue 41, jobs/business/order_runs.py), keyed by order id."""
    after = ""
    while True:
        with connect() as c:
            rows = sql.fetch(c, "sealed_order_inputs", {"after": after,
                                                        "current": report.current,
                                                        "limit": batch})
            if not rows:
                return
            new = [crypto.rewrap_blob(r["key_id"], bytes(r["data"]), p) for r in rows]
            sql.fetch(c, "rewrap_order_inputs", {
                "ids": [r["order_id"] for r in rows], "old": [r["key_id"] for r in rows],
                "key_ids": [n[0] for n in new], "datas": [n[1] for n in new]})
            after = rows[-1]["order_id"]
            report.order_inputs += len(rows)


def seal_legacy(connect: Callable[[], Any], p: crypto.KeyProvider, batch: int = BATCH) -> int:
    """Jobs enqueued before secrets were sealed (plaintext secret fields in the payload,
    still pending/deferred/failed): sealed now."""
    kinds = [name for name in types.names() if types.get(name).secret_fields]
    done, after = 0, 0
    while kinds:
        with connect() as c:
            rows = sql.fetch(c, "legacy_secret_rows", {"types": kinds, "after": after,
                                                       "limit": batch})
            if not rows:
                return done
            for r in rows:
                public, taken = sealing.split(r["job_type"], r["payload"])
                if not taken:
                    continue
                sealed = sealing.seal_secrets(r["id"], r["job_type"], taken, p)
                sql.fetch(c, "seal_legacy_row", {
                    "id": r["id"], "payload": json.dumps(public),
                    "key_id": sealed["secret_key_id"], "dek": sealed["secret_dek"],
                    "data": sealed["secret_data"]})
                done += 1
            after = rows[-1]["id"]
    return done


def bind_unbound(connect: Callable[[], Any], p: crypto.KeyProvider, batch: int = BATCH,
                 ) -> int:
    """Job secrets sealed by an older portalq -- not bound to their job (format 1), or
    bound but with a data key shared by the jobs sealed in the same burst (format 2, whose
    erasure the others' keys would undo): opened and sealed again bound to the job's id,
    type and field with a data key of their own (format 3), under the current KEK."""
    done, after = 0, 0
    while True:
        with connect() as c:
            rows = sql.fetch(c, "unbound_sealed_rows", {"after": after, "limit": batch})
            if not rows:
                return done
            for r in rows:
                taken = json.loads(crypto.open_sealed(
                    r["secret_key_id"], r["secret_dek"], r["secret_data"], p,
                    aad=crypto.place(r["id"], r["job_type"], sealing.SECRETS_FIELD)))
                sealed = sealing.seal_secrets(r["id"], r["job_type"], taken, p)
                sql.fetch(c, "bind_sealed_row", {
                    "id": r["id"], "old": r["secret_data"], "key_id": sealed["secret_key_id"],
                    "dek": sealed["secret_dek"], "data": sealed["secret_data"]})
                done += 1
            after = rows[-1]["id"]


def rewrap_all(connect: Callable[[], Any], p: crypto.KeyProvider | None = None, *,
               batch: int = BATCH, passes: int = 5) -> RewrapReport:
    """Every stored data key wrapped by the provider's current KEK. Rows a worker held
    locked at that moment are skipped and picked up by the next pass."""
    p = p or crypto.provider()
    report = RewrapReport(current=p.current_id())
    with connect() as c:
        key_registry.note(c, p)
    report.legacy_sealed = seal_legacy(connect, p, batch)
    report.bound = bind_unbound(connect, p, batch)
    for _ in range(passes):
        _pass(connect, p, report, batch)
        with connect() as c:
            left = {k: n for k, n in usage(c).items() if k != report.current}
        report.left = left
        if not left:
            break
    return report


def retire(connect: Callable[[], Any], key_id: str, p: crypto.KeyProvider | None = None,
           *, also: Sequence[str] = (), only_recorded: bool = False) -> RewrapReport:
    """Re-wrap whatever still names ``key_id`` -- in this database and, for a key file, in
    every other database recorded as using it (:mod:`jobs.secrets.key_registry`; ``also``: URLs of
    others, or a better way into recorded ones) -- then delete it. Refused, in one line
    naming the database, while a stored value anywhere may still need it: a database that
    cannot be reached, a key older than the record (unless ``only_recorded``: the
    operator's word that every database using the file has been recorded since)."""
    p = p or crypto.provider()
    if key_id == p.current_id():
        raise IllegalTransition(f"key {key_id} is the current key: rotate first")
    if isinstance(p, crypto.FileKeyring):
        _retire_elsewhere(connect, key_id, p, also, only_recorded)
    report = rewrap_all(connect, p)
    if report.left and report.left.get(key_id):
        raise IllegalTransition(f"{report.left[key_id]} stored value(s) still use key "
                                f"{key_id}; run `portalq keys rotate` again")
    remove = getattr(p, "remove", None)
    if report.left and remove is not None and not isinstance(p, crypto.FileKeyring):
        # a KMS's key versions retire from the oldest up (Vault: min_decryption_version)
        raise IllegalTransition(f"stored values still use {', '.join(sorted(report.left))}; "
                                f"run `portalq keys rotate` again")
    if remove is not None:
        remove(key_id)
    crypto.forget_opened()
    return report


def _retire_elsewhere(connect: Callable[[], Any], key_id: str, p: crypto.FileKeyring,
                      also: Sequence[str], only_recorded: bool) -> None:
    """The other databases on ``p``'s key file re-wrapped and found free of ``key_id``."""
    given: dict[str, Callable[[], Any]] = {}
    for url in also:
        reach = functools.partial(txn.connect, url)
        with reach() as c:
            key_registry.note(c, p, strict=True)
            given[key_registry.identity(c)[0]] = reach
    with connect() as c:
        others = key_registry.others(c, p)
    if key_id in key_registry.unrecorded(p) and not only_recorded:
        names = ", ".join(sorted(e["name"] for e in others.values())) or "none"
        raise IllegalTransition(
            f"key {key_id} is older than portalq's record of the databases using {p.path} "
            f"(recorded besides this one: {names}): a database not recorded may still need "
            f"it; once every database using the file has run `portalq migrate` (or is given "
            f"with --also URL), retire it with --only-recorded")
    for ident, entry in sorted(others.items(), key=lambda kv: kv[1]["name"]):
        way: Callable[[], Any] = (given.get(ident)
                                  or functools.partial(key_registry.connect_dsn, entry["dsn"]))
        try:
            report = rewrap_all(way, p)
        except (psycopg.Error, OSError) as e:
            reason = (str(e).strip().splitlines() or [type(e).__name__])[-1][:160]
            raise IllegalTransition(
                f"database {entry['name']} ({ident}) also uses {p.path} and may still need "
                f"key {key_id}, but cannot be reached ({reason}): give its URL with --also "
                f"URL, or `portalq keys forget-database {entry['name']}` if it is gone"
            ) from None
        if report.left and report.left.get(key_id):
            raise IllegalTransition(
                f"{report.left[key_id]} stored value(s) in database {entry['name']} still "
                f"use key {key_id} (rows busy); run `portalq keys retire {key_id}` again")

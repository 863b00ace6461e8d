"""``portalq keys ...``: the keys that seal secrets at rest (see jobs/secrets/crypto.py).

    portalq keys init            make the key file (once, on one node; copy it to the others)
    portalq keys status          which key is current, how many stored values each wraps
    portalq keys rotate          a new current key (key file), every data key re-wrapped
    portalq keys retire KEY_ID   delete an old key once nothing needs it (in any database
                                 recorded as using the key file, or given with --also URL)
    portalq keys forget-database NAME   a database that is gone, out of the key file's record
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from portalq.jobs import queue
from portalq.jobs.secrets import crypto, key_record, key_registry, rotation
from portalq.jobs.secrets.vault_transit import VaultTransit
from portalq.scheduler.cli.common import DbUrl, ExitCode, fail, print_json, use_url

app = typer.Typer(no_args_is_help=True, help="Encryption keys: init, status, rotate, retire.")


def _provider() -> Any:

    return crypto.provider()


def _plugins() -> None:
    # the service, console and flows load only for the command that runs them
    from portalq.scheduler.config import Settings
    from portalq.scheduler.service import load_plugins

    load_plugins(Settings())


def _where(p: Any) -> str:

    if isinstance(p, crypto.FileKeyring):
        return f"key file {p.path}"
    if isinstance(p, crypto.EnvKeys):
        return "PORTALQ_KEK"
    # Vault's HTTP client (urllib.request, ssl) only here: the CLI's start stays small

    if isinstance(p, VaultTransit):
        return f"Vault transit key {p.mount}/{p.key} at {p.addr}"
    return type(p).__name__


@app.command("init")
def init() -> None:
    """Make the key file (PORTALQ_KEY_FILE, default PORTALQ_HOME/keys.json), mode 0600: a
    new current key and the HMAC key. Once, on one node; copy the file to every other node
    (a node never makes one by itself). A key file that exists is kept as it is."""
    p = _provider()
    if not isinstance(p, crypto.FileKeyring):
        fail(f"keys come from {_where(p)}, not a key file: nothing to make")
    if p.init():
        typer.echo(f"made the key file {p.path} (current key {p.current_id()}): copy it to "
                   "every node, and back it up apart from the database")
    else:
        typer.echo(f"the key file {p.path} exists (current key {p.current_id()}); kept as "
                   "it is")


@app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json")] = False,
           database_url: DbUrl = None) -> None:
    """The current key, the keys known, the stored values each one wraps (and, for a key
    file, the databases recorded as using it)."""
    use_url(database_url)
    p = _provider()
    with queue.connect() as c:
        used = rotation.usage(c)
        out: dict[str, Any] = {"provider": _where(p), "current": p.current_id(),
                               "keys": p.key_ids(), "stored_values": used}
        if isinstance(p, crypto.FileKeyring):
            key_registry.note(c, p)
            out["databases"] = sorted(e["name"] for e in
                                      key_record.read(p.path)["databases"].values())
    if as_json:
        print_json(out)
        return
    typer.echo(f"keys from {out['provider']}; current: {out['current']}")
    for key_id in sorted(set(p.key_ids()) | set(used)):
        mark = "*" if key_id == out["current"] else " "
        known = "" if key_id in p.key_ids() else "  (MISSING: these values cannot be opened)"
        typer.echo(f" {mark} {key_id}: {used.get(key_id, 0)} stored value(s){known}")
    for name in out.get("databases", []):
        typer.echo(f"   database using this key file: {name}")


@app.command("rotate")
def rotate(batch: Annotated[int, typer.Option(min=1, help="rows per transaction")] = 500,
           database_url: DbUrl = None) -> None:
    """Make a new key current (key file: a new key; Vault: a new version of the Transit key;
    with PORTALQ_KEK, the first key listed there) and re-wrap every stored data key with
    it, in batches, while the service runs."""
    use_url(database_url)
    _plugins()
    p = _provider()
    old = p.current_id()
    add_current = getattr(p, "add_current", None)
    if add_current is not None:
        new = add_current()
        typer.echo(f"new current key {new} (was {old})")
    report = rotation.rewrap_all(queue.connect, p, batch=batch)
    typer.echo(f"re-wrapped {report.jobs} job(s), {report.documents} document(s) and "
               f"{report.checkpoints} checkpoint(s) under "
               f"{report.current}" + (f"; sealed {report.legacy_sealed} older job(s)"
                                      if report.legacy_sealed else "")
               + (f"; bound {report.bound} older sealed job(s) to their job"
                  if report.bound else "")
               + (f"; re-wrapped {report.order_inputs} order input(s)"
                  if report.order_inputs else ""))
    if report.left:
        fail(f"still under older keys: {report.left} (rows busy); run rotate again",
             ExitCode.REFUSED)
    others = [k for k in p.key_ids() if k != report.current]
    if others:
        typer.echo(f"nothing needs {', '.join(others)} now: `portalq keys retire KEY_ID`")


@app.command("retire")
def retire(key_id: str, database_url: DbUrl = None,
           also: Annotated[list[str] | None, typer.Option(
               "--also", help="another database using the key file (URL; repeatable)")] = None,
           only_recorded: Annotated[bool, typer.Option(
               "--only-recorded", help="every database using the key file is recorded (`keys "
               "status`): retire a key older than the record")] = False) -> None:
    """Delete an old key, after re-wrapping whatever still used it in this database and in
    every other database recorded as using the key file."""
    use_url(database_url)
    _plugins()
    p = _provider()
    if key_id not in p.key_ids():
        fail(f"no key {key_id!r} (known: {', '.join(p.key_ids())})")
    for url in also or ():
        if not url.startswith(("postgresql://", "postgresql+psycopg://")):
            fail("--also takes a database URL: postgresql://...")
    rotation.retire(queue.connect, key_id, p, also=also or (), only_recorded=only_recorded)
    if isinstance(p, crypto.FileKeyring):
        typer.echo(f"key {key_id} deleted from {p.path}")
    elif hasattr(p, "remove"):
        typer.echo(f"key {key_id} retired in {_where(p)} (and every older one)")
    else:
        typer.echo(f"nothing uses key {key_id} any more: remove it from {_where(p)}")


@app.command("forget-database")
def forget_database(name: str) -> None:
    """Drop a database that no longer exists from the key file's record (`keys status`
    lists them), so that `keys retire` stops asking for it."""
    p = _provider()
    if not isinstance(p, crypto.FileKeyring):
        fail(f"keys come from {_where(p)}, not a key file: nothing recorded")
    dropped = key_registry.forget(p.path, name)
    if not dropped:
        fail(f"no database {name!r} recorded for {p.path}")
    typer.echo(f"forgot {', '.join(dropped)} (recorded as using {p.path})")

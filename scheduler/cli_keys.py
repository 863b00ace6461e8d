"""``portalq keys ...``: the keys that seal secrets at rest (see jobs/crypto.py).

    portalq keys status          which key is current, how many stored values each wraps
    portalq keys rotate          a new current key (key file), every data key re-wrapped
    portalq keys retire KEY_ID   delete an old key once nothing needs it
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from portalq.scheduler.cli_common import DbUrl, _use_url, fail, print_json

app = typer.Typer(no_args_is_help=True, help="Encryption keys: status, rotate, retire.")


def _provider() -> Any:
    from portalq.jobs import crypto

    return crypto.provider()


def _plugins() -> None:
    from portalq.scheduler.config import Settings
    from portalq.scheduler.service import load_plugins

    load_plugins(Settings())


def _where(p: Any) -> str:
    from portalq.jobs import crypto

    if isinstance(p, crypto.FileKeyring):
        return f"key file {p.path}"
    if isinstance(p, crypto.EnvKeys):
        return "PORTALQ_KEK"
    from portalq.jobs.vault_transit import VaultTransit

    if isinstance(p, VaultTransit):
        return f"Vault transit key {p.mount}/{p.key} at {p.addr}"
    return type(p).__name__


@app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json")] = False,
           database_url: DbUrl = None) -> None:
    """The current key, the keys known, the stored values each one wraps."""
    from portalq.jobs import keys, queue

    _use_url(database_url)
    p = _provider()
    with queue.connect() as c:
        used = keys.usage(c)
    out = {"provider": _where(p), "current": p.current_id(), "keys": p.key_ids(),
           "stored_values": used}
    if as_json:
        print_json(out)
        return
    typer.echo(f"keys from {out['provider']}; current: {out['current']}")
    for key_id in sorted(set(p.key_ids()) | set(used)):
        mark = "*" if key_id == out["current"] else " "
        known = "" if key_id in p.key_ids() else "  (MISSING: these values cannot be opened)"
        typer.echo(f" {mark} {key_id}: {used.get(key_id, 0)} stored value(s){known}")


@app.command("rotate")
def rotate(batch: Annotated[int, typer.Option(min=1, help="rows per transaction")] = 500,
           database_url: DbUrl = None) -> None:
    """Make a new key current (key file: a new key; Vault: a new version of the Transit key;
    with PORTALQ_KEK, the first key listed there) and re-wrap every stored data key with
    it, in batches, while the service runs."""
    from portalq.jobs import keys, queue

    _use_url(database_url)
    _plugins()
    p = _provider()
    old = p.current_id()
    add_current = getattr(p, "add_current", None)
    if add_current is not None:
        new = add_current()
        typer.echo(f"new current key {new} (was {old})")
    report = keys.rewrap_all(queue.connect, p, batch=batch)
    typer.echo(f"re-wrapped {report.jobs} job(s), {report.documents} document(s) and "
               f"{report.checkpoints} checkpoint(s) under "
               f"{report.current}" + (f"; sealed {report.legacy_sealed} older job(s)"
                                      if report.legacy_sealed else "")
               + (f"; bound {report.bound} older sealed job(s) to their job"
                  if report.bound else ""))
    if report.left:
        fail(f"still under older keys: {report.left} (rows busy); run rotate again", 3)
    others = [k for k in p.key_ids() if k != report.current]
    if others:
        typer.echo(f"nothing needs {', '.join(others)} now: `portalq keys retire KEY_ID`")


@app.command("retire")
def retire(key_id: str, database_url: DbUrl = None) -> None:
    """Delete an old key (after re-wrapping whatever still used it)."""
    from portalq.jobs import crypto, keys, queue

    _use_url(database_url)
    _plugins()
    p = _provider()
    if key_id not in p.key_ids():
        fail(f"no key {key_id!r} (known: {', '.join(p.key_ids())})")
    keys.retire(queue.connect, key_id, p)
    if isinstance(p, crypto.FileKeyring):
        typer.echo(f"key {key_id} deleted from {p.path}")
    elif hasattr(p, "remove"):
        typer.echo(f"key {key_id} retired in {_where(p)} (and every older one)")
    else:
        typer.echo(f"nothing uses key {key_id} any more: remove it from {_where(p)}")

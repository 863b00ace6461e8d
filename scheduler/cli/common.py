"""Helpers shared by the CLI modules: one-line errors, JSON output, input parsing."""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
from datetime import datetime
from enum import IntEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from portalq.jobs.clock import parse_instant
from portalq.jobs.db.connections import classify_error
from portalq.jobs.limits import max_payload_bytes


class ExitCode(IntEnum):
    """The exit codes of ``portalq``: the same for every command.

    ===  ===============  =========================================================
    0    ``OK``           done (``portalq demo``: every order final and mailed)
    1    ``ERROR``        failed otherwise: a database error that is neither input
                          nor unavailability, the demo ran out of time
    2    ``BAD_INPUT``    the command or its input is wrong (unknown option or value,
                          a payload that does not validate, an unknown job): a
                          one-line error, nothing written
    3    ``REFUSED``      the input is fine but the state refuses it: a job that
                          cannot move so (cancel a completed job), an account the
                          portal refused or locked, a portal that does not open
                          within the next 400 days, the console's address in use,
                          rows left under older keys by ``keys rotate`` (busy: run again)
    4    ``UNAVAILABLE``  something needed did not answer: the database (down,
                          refusing connections, timed out), or a portal when
                          ``accounts check`` signs in
    130  ``INTERRUPTED``  stopped with Ctrl-C (or aborted at a prompt)
    ===  ===============  =========================================================
    """

    OK = 0
    ERROR = 1
    BAD_INPUT = 2
    REFUSED = 3
    UNAVAILABLE = 4
    INTERRUPTED = 130


# the names before ExitCode (kept while other modules still use them)
EXIT_INPUT = ExitCode.BAD_INPUT
EXIT_STATE = ExitCode.REFUSED
EXIT_DB = ExitCode.UNAVAILABLE


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(value: Any) -> str:
    """``value`` as text for a terminal: control characters (an escape sequence stored
    before input was checked, a line break) shown escaped (``\\x1b``), never replayed."""
    return _CONTROLS.sub(lambda m: repr(m.group())[1:-1], str(value))


def fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> NoReturn:
    typer.echo(f"portalq: error: {message}", err=True)
    raise typer.Exit(code)


#: the exit code of a database error, by what it means (:func:`jobs.connections.classify_error`)
_DB_EXITS = {"unavailable": ExitCode.UNAVAILABLE, "value": ExitCode.BAD_INPUT,
             "other": ExitCode.ERROR}


def database_error(exc: BaseException) -> tuple[ExitCode | None, str]:
    """(exit code, one-line message) for a database error, else (None, "")."""
    found = classify_error(exc)
    if found is None:
        return None, ""
    return _DB_EXITS[found[0]], found[1]


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return f"<{len(value)} bytes>"
    return str(value)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, default=_json_default, indent=2, sort_keys=True))


def parse_when(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_instant(value)
    except ValueError as exc:
        fail(f"{what}: {exc}")


def read_bounded(path: Path, limit: int, what: str) -> str:
    """A text file of at most ``limit`` bytes, UTF-8 (one-line error otherwise). Reads no
    more than ``limit + 1`` bytes: /dev/zero or a huge file cannot exhaust memory."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        fail(f"cannot read {what} {path}: {exc.strerror}")
    if len(data) > limit:
        fail(f"{what} {path} is larger than {limit} bytes (PORTALQ_MAX_PAYLOAD_BYTES)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{what} {path} is not UTF-8 text (byte {exc.start})")


def load_payload(payload: str | None, payload_file: Path | None,
                  what: str = "payload") -> dict[str, Any]:
    if payload is not None and payload_file is not None:
        fail("give --payload or --payload-file, not both")
    text = payload
    if payload_file is not None:
        text = read_bounded(payload_file, max_payload_bytes(), "payload file")
    if text is None:
        return {}
    if len(text.encode("utf-8", "surrogatepass")) > max_payload_bytes():
        fail(f"{what} is larger than {max_payload_bytes()} bytes (PORTALQ_MAX_PAYLOAD_BYTES)")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except RecursionError:
        fail(f"{what} is nested too deeply")
    if not isinstance(value, dict):
        fail(f"{what} must be a JSON object")
    return value


DbUrl = Annotated[str | None, typer.Option("--database-url", envvar="PORTALQ_DATABASE_URL",
                                           help="PostgreSQL URL (default: embedded server)")]


def use_url(url: str | None) -> None:
    if url:
        os.environ["PORTALQ_DATABASE_URL"] = url




def cli_actor() -> str:
    """Who acts from the CLI, for the audit log: the OS user (and host)."""
    try:
        return f"cli:{getpass.getuser()}@{socket.gethostname()}"
    except Exception:  # noqa: BLE001 - no user name to be had (a bare container)
        return "cli"

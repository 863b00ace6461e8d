"""Helpers shared by the CLI modules: one-line errors, JSON output, input parsing."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

EXIT_INPUT = 2
EXIT_STATE = 3


def fail(message: str, code: int = EXIT_INPUT) -> NoReturn:
    typer.echo(f"portalq: error: {message}", err=True)
    raise typer.Exit(code)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return f"<{len(value)} bytes>"
    return str(value)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, default=_json_default, indent=2, sort_keys=True))


def _parse_instant(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    from jobs.clock import parse_instant

    try:
        return parse_instant(value)
    except ValueError as exc:
        fail(f"{what}: {exc}")


def _load_payload(payload: str | None, payload_file: Path | None) -> dict[str, Any]:
    if payload is not None and payload_file is not None:
        fail("give --payload or --payload-file, not both")
    text = payload
    if payload_file is not None:
        try:
            text = payload_file.read_text()
        except OSError as exc:
            fail(f"cannot read payload file {payload_file}: {exc.strerror}")
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"payload is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    if not isinstance(value, dict):
        fail("payload must be a JSON object")
    return value


DbUrl = Annotated[str | None, typer.Option("--database-url", envvar="PORTALQ_DATABASE_URL",
                                           help="PostgreSQL URL (default: embedded server)")]


def _use_url(url: str | None) -> None:
    import os

    if url:
        os.environ["PORTALQ_DATABASE_URL"] = url



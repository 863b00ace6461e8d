"""The console's settings (``PORTALQ_CONSOLE_*``, modelled in jobs.settings) and its secret key."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from portalq.jobs.db.location import home
from portalq.jobs.errors import InputError
from portalq.jobs.settings.console import MIN_SECRET_BYTES, TOO_SHORT, ConsoleSettings

__all__ = ["MIN_SECRET_BYTES", "TOO_SHORT", "ConsoleSettings", "secret_key"]


def secret_key(settings: ConsoleSettings) -> str:
    """``PORTALQ_CONSOLE_SECRET``, else the key in ``PORTALQ_HOME/console-secret``, created
    (0600, never overwritten) on first use."""
    if settings.secret:
        return settings.secret
    path = Path(home()) / "console-secret"
    try:
        return _checked(path.read_text().strip(), path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_urlsafe(48)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return _checked(path.read_text().strip(), path)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key


def _checked(key: str, path: Path) -> str:
    if len(key.encode()) < MIN_SECRET_BYTES:
        raise InputError(f"the console secret in {path} {TOO_SHORT}")
    return key

"""The record beside a key file of the databases using it (``<key file>.databases``, mode
0600): its reading and writing only. What it means and who writes it: jobs/secrets/key_registry.py.
Below the key providers, so a new key file can begin its record (:func:`begin`)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from portalq.jobs import files
from portalq.jobs.errors import KeyError_


def record_path(key_file: Path) -> Path:
    return key_file.with_name(key_file.name + ".databases")


def begin(key_file: Path) -> None:
    """A new key file (just made by this process): no key of it predates the record."""
    def change(data: dict[str, Any]) -> bool:
        data["unrecorded"] = []
        return True
    try:
        update(key_file, change)
    except OSError:
        pass   # no record: its keys count as unrecorded (the safe side)


@contextmanager
def _locked(key_file: Path) -> Iterator[None]:
    """One writer of the record at a time (processes registering at once lose nothing):
    an advisory lock on the key file's folder."""
    fd = os.open(key_file.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(key_file: Path) -> dict[str, Any]:
    """The record; a key file without one (an older portalq's) starts it with every key it
    holds unrecorded."""
    path = record_path(key_file)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        try:
            ring = json.loads(key_file.read_bytes())
        except FileNotFoundError:
            ring = {"keks": {}}
        except ValueError:   # not JSON, not UTF-8: one line, never a traceback (issue 48)
            ring = None
        if not isinstance(ring, dict) or not isinstance(ring.get("keks"), dict):
            raise KeyError_(f"{key_file} is not a portalq keyring") from None
        return {"unrecorded": list(ring["keks"]), "databases": {}}
    except ValueError:
        raise KeyError_(f"{path} is not portalq's record of the databases using "
                        f"{key_file}") from None
    if not isinstance(data, dict) or not isinstance(data.get("databases"), dict):
        raise KeyError_(f"{path} is not portalq's record of the databases using {key_file}")
    data.setdefault("unrecorded", [])
    return data


def read(key_file: Path) -> dict[str, Any]:
    return _read(key_file)


def write(key_file: Path, data: dict[str, Any]) -> None:
    files.write_private(record_path(key_file), json.dumps(data, indent=1).encode())


def update(key_file: Path, change: Callable[[dict[str, Any]], bool]) -> None:
    with _locked(key_file):
        data = _read(key_file)
        if change(data):
            write(key_file, data)

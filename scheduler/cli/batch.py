"""Reading a ``portalq enqueue-batch`` file: JSON lines, bounded, every field type-checked.

Each line is read with a bound (a line longer than the payload limit plus a margin is an
error, so /dev/zero or a binary file cannot exhaust memory), decoded as UTF-8, parsed, and
its fields checked for their JSON types before any job is built. Errors name the line.
The file is read as it is written, a chunk at a time (:func:`chunks`): a million lines
never sit in memory at once, and a pipe works as well as a file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from portalq.jobs import queue
from portalq.jobs.limits import max_payload_bytes
from portalq.scheduler.cli.common import fail, parse_when

#: lines per batch file: beyond this, split the file (one transaction holds them all)
MAX_LINES = 1_000_000
#: bytes a line may hold beyond its payload (order, keys, options)
LINE_MARGIN = 4096
FIELDS = {"job_type": (str,), "order": (str,), "payload": (dict, type(None)),
          "portal": (str, type(None)), "run_at": (str, type(None)), "priority": (int,),
          "max_attempts": (int,), "idempotency_key": (str, type(None))}
_TYPE_NAMES = {str: "a string", int: "an integer", dict: "an object", type(None): "null"}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for t, name in _TYPE_NAMES.items():
        if isinstance(value, t):
            return name
    return "a number" if isinstance(value, float) else "an array"


def _job(item: dict[str, Any], where: str) -> queue.NewJob:
    if not {"job_type", "order"} <= item.keys():
        fail(f"{where}: needs an object with job_type and order")
    unknown = set(item) - FIELDS.keys()
    if unknown:
        fail(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    for name, allowed in FIELDS.items():
        if name in item:
            value = item[name]
            if isinstance(value, bool) or not isinstance(value, allowed):
                want = " or ".join(_TYPE_NAMES[t] for t in allowed)
                fail(f"{where}: {name} must be {want}, not {_json_type(value)}")
    return queue.NewJob(
        item["job_type"], item["order"], item.get("payload") or {},
        run_at=parse_when(item.get("run_at"), f"{where}: run_at"),
        priority=item.get("priority", 0), max_attempts=item.get("max_attempts", 5),
        idempotency_key=item.get("idempotency_key"), portal=item.get("portal"))


def chunks(path: Path, size: int) -> Iterator[tuple[list[queue.NewJob], list[int], int]]:
    """The jobs of a batch file in order, ``size`` at a time: (jobs, the line number of
    each, bytes read so far). One-line error (exit 2) on the first bad line (bad types, a
    key used for two job types), raised when that line is reached: the caller writes
    inside one transaction and rolls it back. The jobs' values are checked by
    ``enqueue_many`` (its errors name the job)."""
    limit = max_payload_bytes() + LINE_MARGIN
    jobs: list[queue.NewJob] = []
    numbers: list[int] = []
    keys: dict[str, tuple[int, str]] = {}
    try:
        fh = path.open("rb")
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")
    with fh:
        number = done = 0
        while True:
            try:
                raw = fh.readline(limit + 1)
            except OSError as exc:
                fail(f"cannot read {path}: {exc.strerror}")
            if not raw:
                break
            number += 1
            done += len(raw)
            if number > MAX_LINES:
                fail(f"{path}: more than {MAX_LINES} lines; split the batch")
            job = _line(raw, f"{path}:{number}", limit)
            if job is None:
                continue
            if job.idempotency_key is not None:
                first = keys.setdefault(job.idempotency_key.strip(), (number, job.job_type))
                if first[1] != job.job_type:
                    fail(f"{path}:{number}: idempotency key already used on line {first[0]} "
                         f"for a {first[1]} job, not {job.job_type}")
            jobs.append(job)
            numbers.append(number)
            if len(jobs) == size:
                yield jobs, numbers, done
                jobs, numbers = [], []
        if jobs:
            yield jobs, numbers, done


def _line(raw: bytes, where: str, limit: int) -> queue.NewJob | None:
    """One line's job (None for a blank line)."""
    if len(raw) > limit and not raw.endswith(b"\n"):
        fail(f"{where}: line longer than {limit} bytes (payload limit "
             "PORTALQ_MAX_PAYLOAD_BYTES plus room for the other fields)")
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{where}: not UTF-8 text (byte {exc.start})")
    if not line.strip():
        return None
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        fail(f"{where}: not valid JSON: {exc.msg}")
    except RecursionError:
        fail(f"{where}: nested too deeply")
    if not isinstance(item, dict):
        fail(f"{where}: needs an object with job_type and order")
    return _job(item, where)

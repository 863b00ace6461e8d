"""Reading a ``portalq enqueue-batch`` file: JSON lines, bounded, every field type-checked.

Each line is read with a bound (a line longer than the payload limit plus a margin is an
error, so /dev/zero or a binary file cannot exhaust memory), decoded as UTF-8, parsed, and
its fields checked for their JSON types before any job is built. Errors name the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobs import queue
from jobs.limits import max_payload_bytes
from scheduler.cli_common import _parse_instant, fail

#: lines per batch file: beyond this, split the file (each line becomes a job in memory)
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
        run_at=_parse_instant(item.get("run_at"), f"{where}: run_at"),
        priority=item.get("priority", 0), max_attempts=item.get("max_attempts", 5),
        idempotency_key=item.get("idempotency_key"), portal=item.get("portal"))


def read_batch(path: Path) -> tuple[list[queue.NewJob], list[int]]:
    """The jobs of a batch file, in order, and the line number of each; one-line error
    (exit 2) on the first bad line (bad types, a key used for two job types). The jobs'
    values are checked by ``enqueue_many`` (its errors name the job: see ``line_of``)."""
    limit = max_payload_bytes() + LINE_MARGIN
    jobs: list[queue.NewJob] = []
    numbers: list[int] = []
    keys: dict[str, tuple[int, str]] = {}
    try:
        fh = path.open("rb")
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")
    with fh:
        number = 0
        while True:
            try:
                raw = fh.readline(limit + 1)
            except OSError as exc:
                fail(f"cannot read {path}: {exc.strerror}")
            if not raw:
                break
            number += 1
            where = f"{path}:{number}"
            if len(raw) > limit and not raw.endswith(b"\n"):
                fail(f"{where}: line longer than {limit} bytes (payload limit "
                     "PORTALQ_MAX_PAYLOAD_BYTES plus room for the other fields)")
            if number > MAX_LINES:
                fail(f"{path}: more than {MAX_LINES} lines; split the batch")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                fail(f"{where}: not UTF-8 text (byte {exc.start})")
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                fail(f"{where}: not valid JSON: {exc.msg}")
            except RecursionError:
                fail(f"{where}: nested too deeply")
            if not isinstance(item, dict):
                fail(f"{where}: needs an object with job_type and order")
            job = _job(item, where)
            if job.idempotency_key is not None:
                first = keys.setdefault(job.idempotency_key.strip(), (number, job.job_type))
                if first[1] != job.job_type:
                    fail(f"{where}: idempotency key already used on line {first[0]} for a "
                         f"{first[1]} job, not {job.job_type}")
            jobs.append(job)
            numbers.append(number)
    return jobs, numbers

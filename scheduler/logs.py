"""Structured logs: ``key=value`` text or one JSON object per line (PORTALQ_LOG_FORMAT)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from portalq.jobs.errors import InputError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FIELDS = ("job_id", "job_type", "portal", "attempt", "order_id", "node", "duration_ms")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
               "level": record.levelname, "logger": record.name, "msg": record.getMessage()}
        for key in FIELDS:
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info and record.exc_info[0] is not None:
            out["exc_type"] = record.exc_info[0].__name__
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={getattr(record, k)}" for k in FIELDS if hasattr(record, k))
        ts = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return f"{ts} {record.levelname:<7} {record.name}: {record.getMessage()}" + (
            f" [{extra}]" if extra else "")


def setup(fmt: str = "text", level: str = "INFO") -> None:
    if level.upper() not in LEVELS:
        raise InputError(f"PORTALQ_LOG_LEVEL must be one of {', '.join(LEVELS)}, not {level!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("apscheduler", "psycopg.pool", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

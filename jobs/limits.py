"""Input limits and checks of what goes into a job, before anything reaches PostgreSQL.

Every bad value raises :class:`~jobs.errors.InputError` with a message that names the field
but never echoes a payload value (it may be personal data). The limits
(docs/reference/exit-codes.md):

- order id: 1..200 characters, no control characters or line breaks;
- idempotency key: 1..200 characters, same characters as an order id;
- payload: a JSON object of at most ``PORTALQ_MAX_PAYLOAD_BYTES`` (default 256 KiB) as
  stored; no NUL or other control characters in any string except tab, line feed and
  carriage return; no lone surrogates (not encodable as UTF-8);
- run_at: from 2000-01-01T00:00:00Z up to 10 years after now (timezone required);
- priority -100..100, max attempts 1..100 (integers, not booleans or strings).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_core import to_json

from portalq.jobs import clock, settings
from portalq.jobs.errors import InputError

DEFAULT_MAX_PAYLOAD_BYTES = settings.sections.DEFAULT_MAX_PAYLOAD_BYTES
MAX_ORDER_ID = 200
MAX_IDEMPOTENCY_KEY = 200
RUN_AT_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
RUN_AT_HORIZON = timedelta(days=3653)  # ten years
MAX_LIST_LIMIT = 100_000
#: payload strings may hold these (a letter's line breaks); identifiers may not
_TEXT_CONTROLS = frozenset("\t\n\r")


def max_payload_bytes() -> int:
    """``PORTALQ_MAX_PAYLOAD_BYTES`` (default 256 KiB)."""
    return settings.current(settings.JobSettings).max_payload_bytes


# Unicode categories Cc (controls: U+0000-001F, U+007F-009F), Zl/Zp (U+2028, U+2029) and Cs
# (surrogates, which only a lone one can be in a str): one C-speed regex search per string
_IDENT_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_TEXT_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _bad_char(text: str, allowed: frozenset[str]) -> str | None:
    """A description of the first character ``text`` may not hold, or None. ``allowed``
    is empty (identifiers) or the tab and line breaks of free text."""
    found = (_TEXT_BAD if allowed else _IDENT_BAD).search(text)
    if found is None:
        return None
    ch = found.group()
    if ch == "\0":
        return "a NUL character"
    if ch in "\u2028\u2029":
        return f"a line break (U+{ord(ch):04X})"
    if "\ud800" <= ch <= "\udfff":
        return f"an unpaired surrogate (U+{ord(ch):04X})"
    return f"a control character (U+{ord(ch):04X})"


def check_identifier(value: Any, what: str, max_length: int) -> str:
    """An order id or idempotency key: a non-empty single-line string up to ``max_length``."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, not {_json_type(value)}")
    text = value.strip()
    if not text:
        raise InputError(f"{what} must not be empty")
    if len(text) > max_length:
        raise InputError(f"{what} is {len(text)} characters long (at most {max_length})")
    bad = _bad_char(text, frozenset())
    if bad:
        raise InputError(f"{what} must not contain {bad}")
    return text


def check_text(value: Any, what: str, max_length: int = 10_000) -> str:
    """Free text stored with a job (a note, a reason, a confirmation): line breaks allowed."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, not {_json_type(value)}")
    if len(value) > max_length:
        raise InputError(f"{what} is {len(value)} characters long (at most {max_length})")
    bad = _bad_char(value, _TEXT_CONTROLS)
    if bad:
        raise InputError(f"{what} must not contain {bad}")
    return value


def check_payload_strings(payload: Any, what: str = "payload") -> None:
    """Walk a JSON-like value: no key or string holds a character PostgreSQL cannot store
    (NUL, lone surrogates) or another control character. The message gives the path only.
    (A fast look at its JSON first, then the walk for a payload that may fail; the path is
    worked out only for one that does.)"""
    try:
        js = to_json(payload)
    except Exception:   # a lone surrogate (not UTF-8), or a value JSON has no form for
        pass
    else:
        # JSON escapes every character below U+0020 with a backslash; the others refused
        # stand as they are. Neither there: the walk can only pass.
        if b"\\" not in js and (b"\x7f" not in js if js.isascii()
                                 else _RAW_BAD.search(js) is None):
            return
    _walk_payload_strings(payload, what)


#: in UTF-8: U+007F, U+0080-009F, U+2028, U+2029
_RAW_BAD = re.compile(b"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xa8\xa9]")


def _walk_payload_strings(payload: Any, what: str) -> None:
    stack: list[Any] = [payload]
    text_bad, ident_bad = _TEXT_BAD.search, _IDENT_BAD.search
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is str:
            if text_bad(node):
                break
        elif kind is dict or (kind not in _SCALARS and isinstance(node, Mapping)):
            if any(isinstance(k, str) and ident_bad(k) for k in node):
                break
            stack.extend(node.values())
        elif kind is list or kind is tuple:
            stack.extend(node)
        elif kind not in _SCALARS and isinstance(node, str | list | tuple):
            stack.append(str(node) if isinstance(node, str) else list(node))
    else:
        return
    _raise_with_path(payload, what)


_SCALARS = frozenset({int, float, bool, type(None)})


def _raise_with_path(payload: Any, what: str) -> None:
    stack: list[tuple[str, Any]] = [(what, payload)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            bad = _bad_char(node, _TEXT_CONTROLS)
            if bad:
                raise InputError(f"{path} must not contain {bad}")
        elif isinstance(node, Mapping):
            for key, value in node.items():
                if isinstance(key, str):
                    bad = _bad_char(key, frozenset())
                    if bad:
                        raise InputError(f"a key in {path} must not contain {bad}")
                stack.append((f"{path}.{_safe_key(key)}", value))
        elif isinstance(node, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(node))
    raise AssertionError("unreachable: the fast walk found a bad character")


def check_payload_size(payload_json: str, what: str = "payload") -> None:
    check_payload_bytes(len(payload_json.encode()), what)


def check_payload_bytes(size: int, what: str = "payload", limit: int | None = None) -> None:
    """A payload of ``size`` bytes as stored JSON is within ``limit`` (default
    :func:`max_payload_bytes`; a batch reads it once)."""
    if limit is None:
        limit = max_payload_bytes()
    if size > limit:
        raise InputError(f"{what} is {size} bytes as JSON (at most {limit}; "
                         "PORTALQ_MAX_PAYLOAD_BYTES)")


def check_int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{what} must be an integer, not {_json_type(value)}")
    if not low <= value <= high:
        raise InputError(f"{what} must be {low}..{high}, got {value}")
    return value


def check_run_at(value: Any) -> datetime | None:
    """``run_at`` as UTC: aware, from 2000-01-01Z to ten years after now."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InputError(f"run_at must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InputError("run_at needs a timezone")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise InputError("run_at is out of range (years 1..9999 in UTC)") from None
    latest = clock.now() + RUN_AT_HORIZON
    if not RUN_AT_EARLIEST <= utc <= latest:
        raise InputError(f"run_at {utc.isoformat()} is out of range ({RUN_AT_EARLIEST:%Y-%m-%d}"
                         f" .. ten years from now, {latest:%Y-%m-%d})")
    return utc


def check_job_id(job_id: Any) -> int:
    """A job id: an integer (one outside bigint's range names no job)."""
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise InputError(f"a job id must be an integer, not {_json_type(job_id)}")
    return job_id


def check_list_limit(limit: Any) -> int:
    return check_int(limit, "limit", 1, MAX_LIST_LIMIT)


def check_optional_filter(value: Any, what: str) -> str | None:
    """A list filter (status, portal, order id): None or a single-line string."""
    if value is None:
        return None
    return check_identifier(value, what, max(MAX_ORDER_ID, 200))


def _safe_key(key: Any) -> str:
    text = str(key)
    return text if _bad_char(text, frozenset()) is None and len(text) <= 64 else "<key>"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__

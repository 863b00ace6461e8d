"""What a person may see of a job: secret payload fields masked, and every form of this
job's secret values (dashed, bare digits, spaced) scrubbed from any other text of it
(errors, checkpoints, results, events) — a flow that leaked one into an error message must
not leak it further.

Used by the console for every role (nobody needs an SSN on a screen) and for the audit
log's before/after. A secret field is write-only: it can be replaced, never read back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from portalq.jobs import types
from portalq.jobs.errors import InputError, PortalqError
from portalq.jobs.secrets import sealing

#: shown instead of a secret value; sent back unchanged by an edit form it means "keep"
MASK = "(secret: unchanged)"


def secret_fields(job_type: str) -> tuple[str, ...]:
    try:
        return types.get(job_type).secret_fields
    except InputError:
        return ()


def _walk(payload: Any, path: str) -> tuple[Any, str] | None:
    node = payload
    *parents, leaf = path.split(".")
    for p in parents:
        node = node.get(p) if isinstance(node, dict) else None
    return (node, leaf) if isinstance(node, dict) else None


def secret_values(job_type: str, payload: Mapping[str, Any] | None) -> list[str]:
    """The job's secret values as stored (strings), for scrubbing."""
    out = []
    for path in secret_fields(job_type):
        found = _walk(payload or {}, path)
        if found and found[0].get(found[1]) not in (None, ""):
            out.append(str(found[0][found[1]]))
    return out


def _pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    parts = []
    for value in values:
        digits = re.sub(r"\D", "", value)
        if len(digits) >= 4:  # every form: digits with or without any separators between
            parts.append(r"[\s.-]*".join(re.escape(d) for d in digits))
        elif value:
            parts.append(re.escape(value))
    return re.compile("|".join(parts)) if parts else None


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON-like) with every form of each secret replaced by ``***``."""
    pattern = _pattern(secrets)
    if pattern is None:
        return value
    return _map_strings(value, lambda text: pattern.sub("***", text))


def _map_strings(value: Any, fn: Any) -> Any:
    """``value`` (JSON-like) with ``fn`` applied to every string in it."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, Mapping):
        return {k: _map_strings(x, fn) for k, x in value.items()}
    if isinstance(value, list | tuple):
        return [_map_strings(x, fn) for x in value]
    return value


def masked_payload(job_type: str, payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """The payload with each secret field replaced by :data:`MASK` (absent ones stay absent)."""
    out: dict[str, Any] = json.loads(json.dumps(payload or {}))
    for path in secret_fields(job_type):
        found = _walk(out, path)
        if found and found[0].get(found[1]) not in (None, ""):
            found[0][found[1]] = MASK
    return out


def public_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job row (and whatever lists it carries: events, ...) fit to show: secrets masked
    in the payload and scrubbed everywhere else; the rate key (a hash of one) dropped.
    The stored payload holds its secret values sealed (jobs.secrets.sealing): they are
    opened in memory only to know what to scrub (:func:`job_secrets`; never shown), and
    everything, payload included, is also scrubbed of anything shaped like an SSN/ITIN."""
    secrets = secret_values(job["job_type"], job.get("payload")) + job_secrets(job)
    out = {k: v for k, v in job.items()
           if k not in ("rate_key", "payload", "secret_key_id", "secret_dek", "secret_data")}
    out = dict(scrub_all(out, secrets))
    # the non-secret fields too: a number typed into a free-text field is still an SSN
    out["payload"] = scrub_all(masked_payload(job["job_type"], job.get("payload")), secrets)
    return out


def unmask_edit(job_type: str, old: Mapping[str, Any], new: Mapping[str, Any],
                ) -> dict[str, Any]:
    """An edited payload from a form: a secret field left at :data:`MASK` keeps its stored
    value (write-only fields), a new value replaces it."""
    out: dict[str, Any] = json.loads(json.dumps(new))
    for path in secret_fields(job_type):
        found = _walk(out, path)
        if found and found[0].get(found[1]) == MASK:
            before = _walk(old, path)
            if before is not None and before[1] in before[0]:
                found[0][found[1]] = before[0][before[1]]
            else:
                del found[0][found[1]]
    return out


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) turning ``old`` into ``new`` (``jobs.queue.retry``'s
    ``payload_patch``: None deletes a key, nested objects merge)."""
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif isinstance(value, Mapping) and isinstance(old[key], Mapping):
            sub = merge_patch(old[key], value)
            if sub:
                patch[key] = sub
        elif value != old[key]:
            patch[key] = value
    return patch


def field_is_secret(job_types: Iterable[str], path: str) -> bool:
    """True if ``path`` (dotted) is, or lies inside or above, a secret field of any type."""
    for jt in job_types:
        for secret in secret_fields(jt):
            if path == secret or secret.startswith(path + ".") or path.startswith(secret + "."):
                return True
    return False


_SSN_LIKE = re.compile(r"(?<!\d)\d{3}[\s.-]?\d{2}[\s.-]?\d{4}(?!\d)")


def scrub_ssn_like(value: Any) -> Any:
    """For text shown without its job's payload at hand (lists, inbox): anything shaped
    like an SSN/ITIN is replaced by ``***``."""
    return _map_strings(value, lambda text: _SSN_LIKE.sub("***", text))


def job_secrets(job: Mapping[str, Any]) -> list[str]:
    """The job's secret values, opened from their seal in memory (a job row with its
    ``secret_*`` columns), to scrub them from what people are shown or sent: every written
    form of a value is then known, not only the SSN-shaped ones. Empty when they were
    erased, or when this process has not the key (then :func:`scrub_ssn_like` alone)."""
    if job.get("secret_data") is None:
        return []
    try:
        revealed = sealing.reveal(job, strict=False)
    except PortalqError:
        return []
    return sealing.values(job["job_type"], revealed)


def scrub_all(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON-like) with every form of each of ``secrets`` and anything shaped
    like an SSN/ITIN replaced by ``***``: for every text a person is shown or mailed."""
    return scrub_ssn_like(scrub(value, secrets))

"""A job's secret payload fields at rest: sealed at enqueue, opened only for the handler,
erased after use.

A job type declares its secret fields (``JobType.secret_fields``, dotted paths; ``*``
stands for every element of a list). At enqueue their values are taken out of the payload
(which keeps :data:`MARKER` in their place) and sealed together -- one JSON object
``{path: value}`` -- with a fresh data key (:mod:`jobs.secrets.crypto`), into
``job_queue.secret_key_id / secret_dek / secret_data``. The worker opens them in memory
when it hands the payload to the handler. Completing or cancelling a job sets the three
columns to NULL in the same statement (``secrets_erased_at`` says when); failed jobs keep
them for ``PORTALQ_SECRET_RETENTION_DAYS`` (default 30) so an admin can retry, then the
tick erases them. A retry that needs an erased value asks for it again.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pydantic_core import from_json, to_json

from portalq.jobs import types
from portalq.jobs.errors import BusinessError, InputError
from portalq.jobs.secrets import crypto

MARKER = "[encrypted]"
ERASED = "[erased]"


class SecretsErased(BusinessError):
    """The job's secret values were erased (it finished, or failed long ago)."""


def walk_paths(node: Any, parts: list[str], prefix: str) -> Iterator[tuple[str, Any, str]]:
    """(concrete path, parent container, leaf key) for every match of ``parts``."""
    head, rest = parts[0], parts[1:]
    if head == "*":
        if isinstance(node, list):
            for i, item in enumerate(node):
                if rest:
                    yield from walk_paths(item, rest, f"{prefix}{i}.")
        return
    if not isinstance(node, dict) or head not in node:
        return
    if not rest:
        yield f"{prefix}{head}", node, head
    else:
        yield from walk_paths(node[head], rest, f"{prefix}{head}.")


def _secret_fields(job_type: str) -> tuple[str, ...]:
    try:
        return types.get(job_type).secret_fields
    except InputError:
        return ()


@functools.cache
def _plan(specs: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...] | None, str], ...]:
    """Each secret field spec as (spec, its parents, its leaf), parsed once per job type;
    parents None for a spec that needs :func:`walk_paths` (a ``*``, or deeply nested)."""
    out: list[tuple[str, tuple[str, ...] | None, str]] = []
    for spec in specs:
        *parents, leaf = spec.split(".")
        simple = "*" not in spec and len(parents) <= 2
        out.append((spec, tuple(parents) if simple else None, leaf))
    return tuple(out)


def _take(payload: dict[str, Any], specs: tuple[str, ...]) -> dict[str, Any]:
    """Move the secret values out of ``payload`` (markers left), in place: {path: value}."""
    taken: dict[str, Any] = {}
    plan = _PLANS.get(specs)
    if plan is None:
        plan = _PLANS[specs] = _plan(specs)
    for spec, parents, leaf in plan:
        if parents is not None:   # the common case, without walk_paths
            node: Any = payload
            for part in parents:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                value = node.get(leaf)
                if value is not None and value != MARKER:
                    taken[spec] = value
                    node[leaf] = MARKER
            continue
        for path, parent, key in walk_paths(payload, spec.split("."), ""):
            if parent[key] is not None and parent[key] != MARKER:
                taken[path] = parent[key]
                parent[key] = MARKER
    return taken


_PLANS: dict[tuple[str, ...], tuple[tuple[str, tuple[str, ...] | None, str], ...]] = {}


def values(job_type: str, payload: Mapping[str, Any]) -> list[str]:
    """The secret values present in a (revealed) payload."""
    out = []
    for spec in _secret_fields(job_type):
        for _path, parent, key in walk_paths(payload, spec.split("."), ""):
            value = parent[key]
            if isinstance(value, str) and value and value not in (MARKER, ERASED):
                out.append(value)
    return out


def split(job_type: str, payload: dict[str, Any], *, copy: bool = True,
          ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(payload with markers in place of the secrets, {path: secret value}); ``payload``
    is not changed unless ``copy`` is False."""
    specs = _secret_fields(job_type)
    if not specs:
        return payload, {}
    public = json.loads(json.dumps(payload)) if copy else payload
    return public, _take(public, specs)


#: the field name a job's sealed secrets are bound to (all its secret fields, one value)
SECRETS_FIELD = "secrets"


class SecretsNotTheirs(BusinessError):
    """The job's sealed values do not open for this job: altered, or copied from another
    job's row (a database writer). Failed at once, never run with someone else's data."""


def seal_secrets(job_id: int, job_type: str, taken: Mapping[str, Any] | bytes,
                 provider: crypto.KeyProvider | None = None) -> dict[str, Any]:
    """The secret columns of job ``job_id``: ``taken`` ({path: value}, or its JSON) sealed,
    bound to the job's id, type and field (format 2)."""
    sealed = crypto.seal(taken if isinstance(taken, bytes) else to_json(taken), provider,
                         aad=crypto.place(job_id, job_type, SECRETS_FIELD))
    return {"secret_key_id": sealed.key_id, "secret_dek": sealed.wrapped_dek,
            "secret_data": sealed.data}


def seal_rows(rows: list[dict[str, Any]], provider: crypto.KeyProvider | None = None,
              ) -> None:
    """:func:`seal_secrets` for the new job rows of a batch, in place: each row's
    ``"secrets"`` (JSON, or None) is removed and, if any, sealed bound to the row's
    ``"id"`` and ``"job_type"`` into its secret columns (one provider check per batch)."""
    todo: list[dict[str, Any]] = []
    plaintexts: list[bytes] = []
    aads: list[bytes] = []
    templates: dict[str, bytes] = {}
    for r in rows:
        secrets = r.pop("secrets")
        if secrets is not None:
            job_type = r["job_type"]
            template = templates.get(job_type)
            if template is None:
                template = templates[job_type] = crypto.place_template(job_type,
                                                                       SECRETS_FIELD)
            plaintexts.append(secrets)
            aads.append(template % r["id"])
            todo.append(r)
    if not todo:
        return
    done = 0
    for key_id, wrapped, run in crypto.seal_runs(plaintexts, aads, provider):
        for r, data in zip(todo[done:done + len(run)], run, strict=True):
            r["secret_key_id"], r["secret_dek"], r["secret_data"] = key_id, wrapped, data
        done += len(run)


_NO_SECRETS = {"secret_key_id": None, "secret_dek": None, "secret_data": None}


def has_markers(job_type: str, payload: Mapping[str, Any]) -> list[str]:
    """The paths whose value is only a marker (sealed or erased)."""
    out = []
    for spec in _secret_fields(job_type):
        for path, parent, key in walk_paths(payload, spec.split("."), ""):
            if parent[key] in (MARKER, ERASED):
                out.append(path)
    return out


def _put(payload: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path`` in ``payload`` (a shallow copy), copying each container on the way:
    the stored payload the job row holds is never changed."""
    node: Any = payload
    *parents, leaf = path.split(".")
    for p in parents:
        key: Any = int(p) if isinstance(node, list) else p
        child = node[key]
        child = list(child) if isinstance(child, list) else dict(child)
        node[key] = child
        node = child
    node[int(leaf) if isinstance(node, list) else leaf] = value


def reveal(job: Mapping[str, Any], provider: crypto.KeyProvider | None = None, *,
           strict: bool = True) -> dict[str, Any]:
    """The job's payload with its secret values back in place (in memory only).
    Raises :class:`SecretsErased` if a value the payload needs was erased."""
    if job.get("secret_data") is None and not _secret_fields(job["job_type"]):
        return job["payload"] or {}   # nothing sealed, nothing to check (shared, not copied)
    payload = dict(job["payload"] or {})
    if job.get("secret_data") is None:
        missing = has_markers(job["job_type"], payload)
        if missing and strict:
            raise SecretsErased(f"job {job['id']}: {', '.join(missing)} was erased; "
                                f"retry it with --payload-patch giving the value again")
        return payload
    try:
        taken = from_json(crypto.open_sealed(
            job["secret_key_id"], job["secret_dek"], job["secret_data"], provider,
            aad=crypto.place(job["id"], job["job_type"], SECRETS_FIELD)))
    except crypto.NotItsPlace:
        raise SecretsNotTheirs(
            f"job {job['id']}: its sealed secret values do not open for this job (altered, "
            f"or copied from another job's row); not run -- enqueue it again with its "
            f"values") from None
    for path, value in taken.items():
        _put(payload, path, value)
    return payload


def erased_message(job: Mapping[str, Any], paths: list[str]) -> str:
    when = job.get("secrets_erased_at")
    since = f" on {when:%Y-%m-%d}" if when is not None else ""
    example = _patch_example(paths[0])
    return (f"job {job['id']}: {', '.join(paths)} was erased{since}; give it again: "
            f"portalq jobs retry {job['id']} --payload-patch '{example}'")


def _patch_example(path: str) -> str:
    obj: Any = "..."
    for part in reversed(path.split(".")):
        obj = {part: obj}
    return json.dumps(obj)


def for_display(job: Mapping[str, Any], payload: Any) -> Any:
    """``payload`` (a copy, for output) with every secret field shown as [encrypted] or
    [erased], never its value (older rows sealed nothing: masked all the same)."""
    shown = ERASED if job.get("secret_data") is None and job.get("secrets_erased_at") else MARKER
    for spec in _secret_fields(job.get("job_type", "")):
        for _path, parent, key in walk_paths(payload, spec.split("."), ""):
            if parent[key] is not None:
                parent[key] = shown
    return payload


def take_secrets(jt: types.JobType, normal: dict[str, Any]) -> tuple[bytes, bytes | None]:
    """A normalised payload taken apart (in place): (its JSON with markers in place of the
    secret values, the JSON of ``{path: value}`` to seal, or None if it holds none)."""
    taken = _take(normal, jt.secret_fields)
    return to_json(normal), (to_json(taken) if taken else None)



def stored_dict(jt: types.JobType, normal: dict[str, Any]) -> dict[str, Any]:
    """The stored columns of a normalised payload (taken apart in place), but for the
    seal: the payload as JSON text (secret fields replaced by markers) and under
    ``"secrets"`` the JSON of the values to seal (``{path: value}``, or None) -- sealed by
    :func:`seal_secrets` once the job's id is known."""
    payload, secrets = take_secrets(jt, normal)
    return {"payload": payload.decode(), "secrets": secrets, **_NO_SECRETS}


def stored(jt: types.JobType, model: Any) -> dict[str, Any]:
    """:func:`stored_dict` of a validated payload model (JSON text serialised by pydantic
    for types without secret fields)."""
    if not jt.secret_fields:
        return {"payload": model.model_dump_json(exclude_none=True), "secrets": None,
                **_NO_SECRETS}
    return stored_dict(jt, types.normalised(model))   # a fresh dict


def for_retry(job: Mapping[str, Any], patch: Mapping[str, Any] | None,
              merge: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]],
              ) -> dict[str, Any] | None:
    """An admin retry: the new stored columns when ``patch`` changes the payload (the
    merged payload validated and sealed again with a new data key), None otherwise.
    :class:`InputError` when a value the job needs was erased and ``patch`` does not give
    it again. Opens the sealed values in memory only, to validate the merged payload."""
    if not patch:
        if job.get("secret_data") is None:
            missing = has_markers(job["job_type"], job["payload"] or {})
            if missing:
                raise InputError(erased_message(job, missing))
        return None
    given = has_markers(job["job_type"], patch)
    if given:   # the text `jobs show` prints in place of a secret, copied back as a value
        raise InputError(f"job {job['id']}: --payload-patch gives {', '.join(given)} as the "
                         f"text {MARKER} or {ERASED} (what portalq prints in place of a "
                         "secret): give the value itself, or leave it out to keep the "
                         "stored one")
    merged = merge(reveal(job, strict=False), patch)
    missing = has_markers(job["job_type"], merged)
    if missing:
        raise InputError(erased_message(job, missing))
    jt, model = types.parse_payload(job["job_type"], merged)
    columns = stored(jt, model)
    taken = columns.pop("secrets")
    if taken:
        columns.update(seal_secrets(job["id"], jt.name, taken))
    return columns


# -- checkpoint values ----------------------------------------------------------------------
CHECKPOINT_PREFIX = "pqsealed1:"


def _checkpoint_keys(job_type: str) -> tuple[str, ...]:
    try:
        return types.get(job_type).secret_checkpoints
    except InputError:
        return ()


def seal_checkpoint(job_id: int, job_type: str, data: Mapping[str, Any],
                    provider: crypto.KeyProvider | None = None) -> dict[str, Any]:
    """``data`` (a checkpoint update) with the type's secret checkpoint values sealed,
    each bound to the job and its checkpoint key: ``"pqsealed1:<KEK id>:<base64 blob>"``."""
    keys = _checkpoint_keys(job_type)
    out = dict(data)
    for key in keys:
        if key in out and out[key] is not None:
            key_id, blob = crypto.seal_blob(json.dumps(out[key]).encode(), provider,
                                            aad=crypto.place(job_id, job_type,
                                                             f"checkpoint:{key}"))
            out[key] = f"{CHECKPOINT_PREFIX}{key_id}:{base64.b64encode(blob).decode()}"
    return out


def open_checkpoint(job_id: int, job_type: str, checkpoint: Mapping[str, Any] | None,
                    provider: crypto.KeyProvider | None = None) -> dict[str, Any]:
    """The checkpoint with its sealed values opened (in memory); :class:`SecretsNotTheirs`
    for a value sealed for another job or checkpoint key."""
    out = dict(checkpoint or {})
    for key, value in out.items():
        if isinstance(value, str) and value.startswith(CHECKPOINT_PREFIX):
            key_id, b64 = value[len(CHECKPOINT_PREFIX):].split(":", 1)
            try:
                out[key] = json.loads(crypto.open_blob(
                    key_id, base64.b64decode(b64), provider,
                    aad=crypto.place(job_id, job_type, f"checkpoint:{key}")))
            except crypto.NotItsPlace:
                raise SecretsNotTheirs(f"job {job_id}: its sealed checkpoint {key!r} does "
                                       f"not open for this job (altered, or copied from "
                                       f"another job or key)") from None
    return out


def checkpoint_for_display(checkpoint: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: (MARKER if isinstance(v, str) and v.startswith(CHECKPOINT_PREFIX) else v)
            for k, v in (checkpoint or {}).items()}


def rekey_checkpoint_value(job_id: int, job_type: str, key: str, value: str,
                           provider: crypto.KeyProvider | None = None) -> str:
    """A sealed checkpoint value under the current KEK: re-wrapped if it has a data key of
    its own (format 3); else -- an older portalq's, whose data key other values sealed in
    the same burst share (their keys would open it once it is erased) -- opened and sealed
    again with a key of its own."""
    key_id, b64 = value[len(CHECKPOINT_PREFIX):].split(":", 1)
    blob = base64.b64decode(b64)
    if crypto.split_blob(blob)[1][:4] == crypto.V3:
        return rewrap_checkpoint_value(value, provider)
    aad = crypto.place(job_id, job_type, f"checkpoint:{key}")
    try:
        plain = crypto.open_blob(key_id, blob, provider, aad=aad)
    except crypto.NotItsPlace:   # not this job's: left as it is (opening it will refuse)
        return rewrap_checkpoint_value(value, provider)
    new_id, new_blob = crypto.seal_blob(plain, provider, aad=aad)
    return f"{CHECKPOINT_PREFIX}{new_id}:{base64.b64encode(new_blob).decode()}"


def rewrap_checkpoint_value(value: str, provider: crypto.KeyProvider | None = None) -> str:
    key_id, b64 = value[len(CHECKPOINT_PREFIX):].split(":", 1)
    new_id, blob = crypto.rewrap_blob(key_id, base64.b64decode(b64), provider)
    return f"{CHECKPOINT_PREFIX}{new_id}:{base64.b64encode(blob).decode()}"

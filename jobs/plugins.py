"""Where job types come from: the ``portalq.plugins`` entry-point group and ``PORTALQ_PLUGINS``.

Every entry point of portalq -- each CLI command, the service, the console -- sees the same
job types because the registry (:mod:`jobs.types`) loads plugins itself, once, on its first
lookup. A plugin is a module that registers job types (and portals) when imported:

- installed packages declare it in their packaging metadata::

      [project.entry-points."portalq.plugins"]
      ontario = "ontario_portal.jobs"

  (portalq's own portals come this way: ``builtin = "portals.catalogue"``);
- or it is named at run time: ``PORTALQ_PLUGINS=mymodule,other.module``.

A plugin that cannot be imported is an input error naming it, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import threading
from importlib.metadata import entry_points

from jobs.errors import InputError

GROUP = "portalq.plugins"

_lock = threading.RLock()
_loaded: set[str] = set()
_loading = False


def named(spec: str | None) -> list[str]:
    """Module names in a comma-separated ``PORTALQ_PLUGINS`` value."""
    return [m.strip() for m in (spec or "").split(",") if m.strip()]


def _import(name: str, label: str) -> None:
    if name in _loaded:
        return
    _loaded.add(name)  # first: a plugin that looks job types up while importing is fine
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any failure to import is the plugin's
        _loaded.discard(name)
        raise InputError(f"cannot load plugin {label}: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")) from None


#: what :func:`load` has done: the entry points scanned, and the specs imported. The fast
#: path reads these without the lock (every job type lookup calls load(); scanning the
#: installed distributions' metadata costs milliseconds, more than an enqueue)
_entry_points_done = False
_specs_done: set[str] = set()


def load(spec: str | None = None) -> None:
    """Import the entry-point plugins and those in ``spec`` (default ``PORTALQ_PLUGINS``).
    Idempotent, and cheap after the first call; safe to call from every entry point."""
    global _loading, _entry_points_done
    if spec is None:
        spec = os.environ.get("PORTALQ_PLUGINS") or ""
    if _entry_points_done and spec in _specs_done:
        return
    with _lock:
        if _loading:
            return
        _loading = True
        try:
            if not _entry_points_done:
                eps = sorted(entry_points(group=GROUP),
                             key=lambda e: (e.name != "builtin", e.name))
                for ep in eps:
                    _import(ep.value.split(":")[0], f"{ep.name} ({ep.value})")
                _entry_points_done = True
            for name in named(spec):
                _import(name, name)
            _specs_done.add(spec)
        finally:
            _loading = False

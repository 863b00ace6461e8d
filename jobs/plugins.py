"""Where job types come from: the ``portalq.plugins`` entry-point group and ``PORTALQ_PLUGINS``.

Every entry point of portalq -- each CLI command, the service, the console -- sees the same
job types because the registry (:mod:`jobs.types`) loads plugins itself, once, on its first
lookup. A plugin is a module that registers job types (and portals) when imported:

- installed packages declare it in their packaging metadata::

      [project.entry-points."portalq.plugins"]
      ontario = "ontario_portal.jobs"

  (portalq's own portals come this way: ``builtin = "portalq.portals.catalogue"``);
- or it is named at run time: ``PORTALQ_PLUGINS=mymodule,other.module``.

A plugin that cannot be imported is an input error naming it, never a traceback; so is one
that calls ``sys.exit`` while loading, or declares a job type another plugin (or portalq)
already declared (:func:`jobs.types.register`).
"""

from __future__ import annotations

import importlib
import threading
from importlib.metadata import entry_points

from portalq.jobs import settings
from portalq.jobs.errors import InputError

GROUP = "portalq.plugins"

_lock = threading.RLock()
_loaded: set[str] = set()
_loading = False
#: the plugins being imported, innermost last: who declares a job type (jobs/types.py)
_importing: list[str] = []
#: the ``PORTALQ_PLUGINS`` values already loaded in full: a lookup (one per job claimed)
#: then costs a set membership, not a scan of every installed package's metadata
_done: set[str] = set()


def named(spec: str | None) -> list[str]:
    """Module names in a comma-separated ``PORTALQ_PLUGINS`` value."""
    return [m.strip() for m in (spec or "").split(",") if m.strip()]


def current() -> str | None:
    """The module name of the plugin being imported now (None outside plugin loading)."""
    return _importing[-1] if _importing else None


def _import(name: str, label: str) -> None:
    if name in _loaded:
        return
    _loaded.add(name)  # first: a plugin that looks job types up while importing is fine
    _importing.append(name)
    try:
        importlib.import_module(name)
    except InputError as exc:   # refused by the registry: its message names the plugin
        _loaded.discard(name)
        raise InputError(f"cannot load plugin {label}: {exc}") from None
    except SystemExit as exc:   # not the plugin's to end portalq (silently, with its code)
        _loaded.discard(name)
        raise InputError(f"cannot load plugin {label}: it called sys.exit({exc.code!r}) "
                         "while loading") from None
    except Exception as exc:  # noqa: BLE001 - any failure to import is the plugin's
        _loaded.discard(name)
        raise InputError(f"cannot load plugin {label}: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")) from None
    finally:
        _importing.pop()


def load(spec: str | None = None) -> None:
    """Import the entry-point plugins and those in ``spec`` (default ``PORTALQ_PLUGINS``).
    Idempotent; safe to call from every entry point."""
    global _loading
    wanted = (settings.current(settings.JobSettings).plugins if spec is None else spec) or ""
    if wanted in _done:
        return
    with _lock:
        if _loading or wanted in _done:
            return
        _loading = True
        try:
            if not _done:   # the installed entry points: once per process
                eps = sorted(entry_points(group=GROUP),
                             key=lambda e: (e.name != "builtin", e.name))
                for ep in eps:
                    _import(ep.value.split(":")[0], f"{ep.name} ({ep.value})")
            for name in named(wanted):
                _import(name, name)
            _done.add(wanted)
        finally:
            _loading = False

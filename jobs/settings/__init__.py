"""Every ``PORTALQ_*`` setting, read here and nowhere else (tests/unit/test_settings.py).

- The fixed names are fields of validated models, one class per section
  (:mod:`.sections`, :mod:`.console`); :class:`Settings` is all of them but the console's.
  The service builds one ``Settings()`` at start; code that reads one value when it needs
  it asks :func:`current` for its section, so a value set in the environment since (a test's
  monkeypatch, the demo) counts, as it did when each module read the environment itself.
- The names with a per-portal, per-account or per-job-type part are read with
  :func:`family` / :func:`variable`, and only those listed in :data:`FAMILIES`.

docs/reference/settings.md is generated from these models (docs/gen/settings_ref.py).
"""

from __future__ import annotations

import os
import threading
from typing import TypeVar

from pydantic import ValidationError

from portalq.jobs.errors import InputError
from portalq.jobs.settings.console import ConsoleSettings
from portalq.jobs.settings.irs import IrsDesigneeSettings
from portalq.jobs.settings.section import CONFIG_ENV, SECRETS_DIR_ENV, Section
from portalq.jobs.settings.sections import (
    SECTIONS,
    BreakerSettings,
    BrowserSettings,
    DatabaseSettings,
    FilesSettings,
    JobSettings,
    KeySettings,
    MailSettings,
    RetentionSettings,
    ServiceSettings,
    Settings,
    TestSettings,
    WebhookSettings,
)

__all__ = ["FAMILIES", "SECTIONS", "BreakerSettings", "BrowserSettings", "ConsoleSettings",
           "DatabaseSettings", "FilesSettings", "IrsDesigneeSettings", "JobSettings",
           "KeySettings", "MailSettings", "RetentionSettings", "Section", "ServiceSettings",
           "Settings", "TestSettings", "WebhookSettings", "current", "error_message", "family",
           "reset", "variable"]

#: prefix -> what follows it and what the variable holds
FAMILIES = {
    "PORTALQ_PORTAL_URL_": "<CODE>: where portal CODE's flow starts instead of its own "
                           "address (a stand-in, a test copy)",
    "PORTALQ_BROWSER_WS_": "<CODE>: the remote Playwright browser (ws://...) for portal CODE",
    "PORTALQ_PROXY_": "<CODE>: the egress proxy http[s]|socks5://[user@]host:port of portal "
                      "CODE (<CODE>_BYPASS: hosts that skip it); its password is the account "
                      "secret <code>/proxy/password",
    "PORTALQ_ACCOUNT_": "<PORTAL>_<ACCOUNT>_<KEY>: an account secret (e.g. "
                        "PORTALQ_ACCOUNT_CRTC_DEMO_PASSWORD), when it is not a file "
                        "account_<portal>_<account>_<key> in PORTALQ_SECRETS_DIR",
    "PORTALQ_STEP_HOURS_": "<PORTAL>_<STEP>: the hours of a portal's step that keeps its own "
                           "calendar (e.g. PORTALQ_STEP_HOURS_BC_CORPORATE_ONLINE_PAYMENT="
                           "'Daily 00:00-24:00' where a stand-in PayBC takes payments at any "
                           "hour)",
    "PORTALQ_ORDER_SQL_": "<JOB_TYPE>: the read-only query that turns an order id into the "
                         "payload of a JOB_TYPE job (e.g. PORTALQ_ORDER_SQL_FILE_ENTITY)",
}

S = TypeVar("S", bound=Section)

_lock = threading.Lock()
_built: dict[type[Section], tuple[tuple[str | None, ...], Section]] = {}


_names: dict[type[Section], tuple[str, ...]] = {}


def _key(section: type[Section]) -> tuple[str | None, ...]:
    """The section's variables as they are now (a few dictionary look-ups: it is asked
    once per enqueue call)."""
    names = _names.get(section)
    if names is None:
        names = _names[section] = (CONFIG_ENV, SECRETS_DIR_ENV,
                                   *section.env_names().values())
    return tuple(map(os.environ.get, names))


def error_message(section: type[Section], exc: ValidationError) -> str:
    """One line naming the variable: ``PORTALQ_X must be ...`` or ``invalid setting
    PORTALQ_X: ...`` (never the value, which may be a secret)."""
    first = exc.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    if not field:   # a rule of the whole section (e.g. all of a group or none): it names them
        return f"invalid settings: {message}"
    name = section.env_names().get(field, field.upper())
    if message.startswith("must "):
        return f"{name} {message}"
    return f"invalid setting {name}: {message}"


def current(section: type[S]) -> S:
    """``section`` as the environment (and the config file, the secrets folder) has it now:
    built again whenever one of its variables changed since the last call. A bad value is
    an :class:`InputError` of one line."""
    key = _key(section)
    with _lock:
        found = _built.get(section)
        if found is not None and found[0] == key:
            return found[1]  # type: ignore[return-value]
    try:
        built = section()
    except ValidationError as exc:
        raise InputError(error_message(section, exc)) from None
    with _lock:
        _built[section] = (key, built)
    return built


def reset() -> None:
    """Forget the sections built (a test that changed the config file or a secret file)."""
    with _lock:
        _built.clear()


def _known(prefix: str) -> str:
    if prefix not in FAMILIES:
        raise KeyError(f"{prefix} is not a documented family of settings (jobs.settings)")
    return prefix


def family(prefix: str) -> dict[str, str]:
    """Every variable of the family ``prefix`` (a key of :data:`FAMILIES`) set now: its
    full name -> its value."""
    _known(prefix)
    return {key: value for key, value in os.environ.items() if key.startswith(prefix)}


def variable(prefix: str, rest: str) -> str | None:
    """The variable ``prefix + rest`` of a family (e.g. ``variable("PORTALQ_ACCOUNT_",
    "CRTC_DEMO_PASSWORD")``), None when unset or empty."""
    return os.environ.get(_known(prefix) + rest) or None

"""Where a portal account's secrets come from: never the database, a payload or a log.

The default provider reads, in this order:

- a file ``<PORTALQ_SECRETS_DIR>/account_<portal>_<account>_<key>`` -- the way container
  orchestrators mount secrets (Kubernetes ``secret`` volumes, compose ``secrets:``); it must
  be readable by its owner only, or it is refused;
- the environment variable ``PORTALQ_ACCOUNT_<PORTAL>_<ACCOUNT>_<KEY>`` (upper case, ``-`` as
  ``_``).

``key`` is ``password`` or ``totp_seed``. A vault (HashiCorp Vault, a cloud secret manager)
plugs in with :func:`set_provider` from a ``PORTALQ_PLUGINS`` module: any object with
``get(portal, account, key) -> str | None``. Values are fetched when a flow signs in and
kept only in that flow's memory.
"""

from __future__ import annotations

import stat
from typing import Protocol

from portalq.jobs import settings
from portalq.jobs.errors import InputError

KEYS = ("password", "totp_seed")


class SecretsProvider(Protocol):
    def get(self, portal: str, account: str, key: str) -> str | None: ...


def _name(portal: str, account: str, key: str) -> str:
    return f"{portal}_{account}_{key}".replace("-", "_")


class FilesAndEnvironment:
    """The default provider (see the module docstring)."""

    def get(self, portal: str, account: str, key: str) -> str | None:
        folder = settings.current(settings.FilesSettings).secrets_dir
        if folder is not None:
            path = folder / f"account_{_name(portal, account, key)}"
            if path.is_file():
                mode = path.stat().st_mode
                if mode & (stat.S_IRWXG | stat.S_IRWXO):
                    raise InputError(f"secret file {path.name} is readable by others "
                                     f"(mode {stat.filemode(mode)}): chmod 600 it")
                return path.read_text().strip() or None
        return settings.variable("PORTALQ_ACCOUNT_", _name(portal, account, key).upper())


_provider: SecretsProvider = FilesAndEnvironment()


def set_provider(provider: SecretsProvider) -> None:
    global _provider
    _provider = provider


def provider() -> SecretsProvider:
    return _provider


def get(portal: str, account: str, key: str) -> str | None:
    if key not in KEYS:
        raise ValueError(f"unknown account secret {key!r}")
    return _provider.get(portal, account, key)


def present(portal: str, account: str) -> dict[str, bool]:
    """Which secrets the provider has for the account (never their values)."""
    out = {}
    for key in KEYS:
        try:
            out[key] = get(portal, account, key) is not None
        except InputError:
            out[key] = False
    return out

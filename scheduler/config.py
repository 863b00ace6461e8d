"""The service's settings: the model of every ``PORTALQ_*`` name is jobs.settings; this adds
what needs the service's and the portals' modules (the portals' addresses, remote browsers,
the database's connection options, the log level's check)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import field_validator

from portalq.jobs import settings as _settings
from portalq.jobs.db.location import connect_options, home, parse_url
from portalq.portals.catalogue import STANDIN_PATHS
from portalq.portals.flows.remote_browsers import endpoints_from_env


class Settings(_settings.Settings):
    """Settings from the environment, then the config file, then files in
    ``PORTALQ_SECRETS_DIR``, then the defaults (jobs.settings)."""

    def redirected_portals(self) -> dict[str, str]:
        """Portals this configuration points away from their own address (stand-ins or a
        ``PORTALQ_PORTAL_URL_<CODE>``): a production start says so."""
        return self.portal_urls({})

    @field_validator("database_url")
    @classmethod
    def _parsable_url(cls, value: str | None) -> str | None:
        if value:

            parse_url(value)  # InputError, never quoting the password
        return value

    def pool_options(self) -> dict[str, Any]:
        """psycopg options for connections to ``database_url`` (see
        :func:`jobs.db.location.connect_options`)."""
        return connect_options(self.direct_database_url)

    def artifacts(self) -> Path:
        if self.artifacts_dir is not None:
            return self.artifacts_dir

        return home() / "artifacts"

    def browser_endpoints(self) -> dict[str, str]:
        """Remote browser per portal: ``PORTALQ_BROWSER_WS_<CODE>``; ``"*"``:
        ``PORTALQ_BROWSER_WS`` for the others (none: a local Chromium)."""
        return endpoints_from_env(_settings.family("PORTALQ_BROWSER_WS_"), self.browser_ws)

    def portal_urls(self, stored: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """Where each portal's flow starts: its stored address (``portals.url``), unless the
        stand-ins are asked for (``PORTALQ_STANDIN_URL``) or one portal is pointed elsewhere
        (``PORTALQ_PORTAL_URL_<CODE>``)."""
        urls = {code: url for code, url in (stored or {}).items() if url}
        if self.standin_url.strip():
            base = self.standin_url.strip().rstrip("/")
            urls.update({code: f"{base}/{path}" for code, path in STANDIN_PATHS.items()})
        for key, value in _settings.family("PORTALQ_PORTAL_URL_").items():
            urls[key.removeprefix("PORTALQ_PORTAL_URL_").lower()] = value
        return urls

"""Service settings: ``PORTALQ_*`` environment variables (or a ``.env``-style file named by
``PORTALQ_CONFIG``), with defaults that need nothing configured."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from portalq.jobs.database import connect_options, home, parse_url
from portalq.jobs.files import check_secret_file
from portalq.portals.catalogue import STANDIN_PATHS
from portalq.portals.flows.pool import endpoints_from_env
from portalq.scheduler.logs import LEVELS


def _check_secret_files(folder: Path) -> None:
    """The setting files of ``PORTALQ_SECRETS_DIR`` (``portalq_smtp_url`` with its
    password...): one others may read or change is refused (jobs.files.check_secret_file)."""
    try:
        entries = list(folder.glob("portalq_*"))
    except OSError:
        return   # pydantic says what is wrong with the folder itself
    for path in entries:
        try:
            st = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            check_secret_file(path, st, "secret file")


class Settings(BaseSettings):
    """Settings from the environment, then the config file, then files in
    ``PORTALQ_SECRETS_DIR`` (one file per setting, named ``portalq_<setting>``: secrets
    mounted as files), then the defaults."""

    model_config = SettingsConfigDict(env_prefix="PORTALQ_", env_file=os.environ.get(
        "PORTALQ_CONFIG"), extra="ignore", hide_input_in_errors=True)

    def __init__(self, **values: Any) -> None:
        folder = os.environ.get("PORTALQ_SECRETS_DIR")
        if folder and "_secrets_dir" not in values:
            _check_secret_files(Path(folder))
            values["_secrets_dir"] = folder
        super().__init__(**values)

    database_url: str | None = Field(None, description="PostgreSQL URL; unset: embedded server")
    direct_database_url: str | None = Field(
        None, description="PostgreSQL itself, when database_url is a transaction pooler "
        "(PgBouncer): LISTEN, the leader's advisory lock and migrations use it; unset: "
        "database_url")
    node_id: str = Field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}",
                         description="this process's name in lock_owner and events")
    workers: int = Field(4, ge=1, le=256, description="jobs run concurrently by this process")
    tick_seconds: float = Field(60.0, gt=0, description="period of the maintenance tick")
    claim_batch: int = Field(50, ge=1, description="jobs claimed per round trip")
    poll_seconds: float = Field(1.0, gt=0, description="idle re-check for jobs coming due")
    heartbeat_seconds: float = Field(10.0, gt=0)
    stale_after_seconds: float = Field(60.0, gt=0,
                                       description="a running job without heartbeat this "
                                       "long is rescued")
    job_timeout_seconds: float = Field(900.0, gt=0, description="a handler running longer "
                                       "is cancelled and retried")
    retry_base_seconds: float = Field(30.0, gt=0, description="first retry backoff (doubles "
                                      "per attempt, with jitter)")
    retry_cap_seconds: float = Field(3600.0, gt=0, description="longest retry backoff")
    breaker_threshold: int = Field(3, ge=1, description="distinct jobs showing outage signs "
                                   "(maintenance page, 5xx, timeouts, lost connections) "
                                   "within the window that pause a portal")
    breaker_probe_seconds: float = Field(300.0, gt=0, description="a paused portal is probed "
                                         "with one job this often")
    breaker_window_seconds: float = Field(300.0, gt=0, description="outage signs count "
                                          "towards the threshold for this long")
    breaker_probe_limit: int = Field(3, ge=0, description="a job that fails this many probes "
                                     "of a paused portal with no other job failing one "
                                     "meanwhile is escalated (0 = never)")
    crash_limit: int = Field(3, ge=0, description="rescues after a worker died that refund "
                             "the attempt; one more escalates the job as 'crashing'")
    reconnect_cap_seconds: float = Field(1.0, gt=0, description="longest wait between "
                                         "reconnect attempts to the database")
    grace_seconds: float = Field(30.0, ge=0, description="SIGTERM: time running jobs get to "
                                 "finish before they are released")
    retention_days: float = Field(30.0, gt=0, description="finished jobs and artifacts kept")
    secret_retention_days: float = Field(30.0, gt=0, description="a failed job's secret "
                                         "values (SSNs...) kept for an admin retry, then "
                                         "erased; completed/cancelled jobs' at once")
    failed_retention_days: float = Field(90.0, ge=0, description="failed jobs deleted this "
                                         "long after failing; 0 = kept until handled")
    admin_emails: str = Field("", description="comma-separated escalation recipients")
    smtp_url: str = Field("smtp://127.0.0.1:8025", description="smtp://[user:pass@]host:port"
                          " (smtps:// for TLS; ?starttls=1 for STARTTLS)")
    mail_from: str = "portalq@localhost"
    metrics_port: int = Field(0, ge=0, le=65535,
                              description="Prometheus /metrics and /health; 0 = off")
    metrics_host: str = "127.0.0.1"
    artifacts_dir: Path | None = Field(None, description="screenshots and traces "
                                       "(default: PORTALQ_HOME/artifacts)")
    standin_url: str = Field("", description="point the built-in portals at the stand-ins "
                             "served there (demo and tests only; e.g. http://127.0.0.1:8765). "
                             "Empty: each portal's own address (portals.url); per portal: "
                             "PORTALQ_PORTAL_URL_<CODE>")
    browser_ws: str = Field("", description="remote Playwright browser (ws://...) instead of a "
                            "local Chromium")
    browser_max_contexts: int = Field(0, ge=0, description="open contexts per remote browser "
                                      "endpoint at once, from this process (0: no cap)")
    browser_connect_timeout_seconds: float = Field(30.0, gt=0, description="connecting to a "
                                                   "remote browser server gives up after this")
    portals: str = Field("", description="comma-separated portals this node claims jobs of "
                         "(its role); empty: all")
    job_types: str = Field("", description="comma-separated job types this node claims "
                           "(its role); empty: all")
    plugins: str = Field("", description="comma-separated modules imported at start; they "
                         "register job types and handlers")
    log_format: str = Field("text", pattern="^(text|json)$")
    log_level: str = "INFO"
    connect_timeout_seconds: float = Field(10.0, gt=0, le=3600, description="longest wait "
                                           "for a database connection to open")
    approval: str = Field("", description="comma-separated job types or portals whose jobs "
                          "stop at the review page for an admin's approval before they submit")
    question_deadline_seconds: float = Field(600.0, gt=0, le=86400, description="how long "
                                             "a flow waits for a person's answer (an "
                                             "e-mailed code) before its attempt is refunded")
    mail_gather_seconds: float = Field(5, ge=0, le=600, description="a failed job's "
                                       "escalation mail waits this long for others of the "
                                       "same cause, so one outage is one mail listing its "
                                       "jobs (0: no wait)")
    console_url: str = Field("", description="the admin console's address as admins reach "
                             "it (e.g. https://portalq.internal:8780); escalation mails link "
                             "to the job's page there")

    def redirected_portals(self) -> dict[str, str]:
        """Portals this configuration points away from their own address (stand-ins or a
        ``PORTALQ_PORTAL_URL_<CODE>``): a production start says so."""
        return self.portal_urls({})

    def job_url(self, job_id: int) -> str | None:
        """The console page of a job (None without PORTALQ_CONSOLE_URL)."""
        base = self.console_url.strip().rstrip("/")
        return f"{base}/jobs/{int(job_id)}" if base else None

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in LEVELS:
            raise ValueError(f"must be one of {', '.join(LEVELS)}")
        return value.upper()

    @field_validator("database_url")
    @classmethod
    def _parsable_url(cls, value: str | None) -> str | None:
        if value:
            parse_url(value)  # InputError, never quoting the password
        return value

    def pool_options(self) -> dict[str, Any]:
        """psycopg options for connections to ``database_url`` (see
        :func:`jobs.database.connect_options`)."""
        return connect_options(self.direct_database_url)

    def admins(self) -> list[str]:
        return [a.strip() for a in self.admin_emails.split(",") if a.strip()]

    def artifacts(self) -> Path:
        if self.artifacts_dir is not None:
            return self.artifacts_dir
        return home() / "artifacts"

    def browser_endpoints(self) -> dict[str, str]:
        """Remote browser per portal: ``PORTALQ_BROWSER_WS_<CODE>``; ``"*"``:
        ``PORTALQ_BROWSER_WS`` for the others (none: a local Chromium)."""
        return endpoints_from_env(os.environ, self.browser_ws)

    def portal_urls(self, stored: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """Where each portal's flow starts: its stored address (``portals.url``), unless the
        stand-ins are asked for (``PORTALQ_STANDIN_URL``) or one portal is pointed elsewhere
        (``PORTALQ_PORTAL_URL_<CODE>``)."""
        urls = {code: url for code, url in (stored or {}).items() if url}
        if self.standin_url.strip():
            base = self.standin_url.strip().rstrip("/")
            urls.update({code: f"{base}/{path}" for code, path in STANDIN_PATHS.items()})
        for key, value in os.environ.items():
            if key.startswith("PORTALQ_PORTAL_URL_"):
                urls[key.removeprefix("PORTALQ_PORTAL_URL_").lower()] = value
        return urls

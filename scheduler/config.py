"""Service settings: ``PORTALQ_*`` environment variables (or a ``.env``-style file named by
``PORTALQ_CONFIG``), with defaults that need nothing configured."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PORTALQ_", env_file=os.environ.get(
        "PORTALQ_CONFIG"), extra="ignore")

    database_url: str | None = Field(None, description="PostgreSQL URL; unset: embedded server")
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
    breaker_threshold: int = Field(3, ge=1, description="outage signs in a row (maintenance "
                                   "page, 5xx, timeouts) that pause a portal")
    breaker_probe_seconds: float = Field(300.0, gt=0, description="a paused portal is probed "
                                         "with one job this often")
    grace_seconds: float = Field(30.0, ge=0, description="SIGTERM: time running jobs get to "
                                 "finish before they are released")
    retention_days: float = Field(30.0, gt=0, description="finished jobs and artifacts kept")
    admin_emails: str = Field("", description="comma-separated escalation recipients")
    smtp_url: str = Field("smtp://127.0.0.1:8025", description="smtp://[user:pass@]host:port"
                          " (smtps:// for TLS; ?starttls=1 for STARTTLS)")
    mail_from: str = "portalq@localhost"
    metrics_port: int = Field(0, ge=0, description="Prometheus /metrics and /health; 0 = off")
    metrics_host: str = "127.0.0.1"
    artifacts_dir: Path | None = Field(None, description="screenshots and traces "
                                       "(default: PORTALQ_HOME/artifacts)")
    standin_url: str = Field("http://127.0.0.1:8765", description="base URL of the stand-in "
                             "portals; per portal: PORTALQ_PORTAL_URL_<CODE>")
    browser_ws: str = Field("", description="remote Playwright browser (ws://...) instead of a "
                            "local Chromium")
    plugins: str = Field("", description="comma-separated modules imported at start; they "
                         "register job types and handlers")
    log_format: str = Field("text", pattern="^(text|json)$")
    log_level: str = "INFO"
    console_url: str = Field("", description="the admin console's address as admins reach "
                             "it (e.g. https://portalq.internal:8780); escalation mails link "
                             "to the job's page there")

    def job_url(self, job_id: int) -> str | None:
        """The console page of a job (None without PORTALQ_CONSOLE_URL)."""
        base = self.console_url.strip().rstrip("/")
        return f"{base}/jobs/{int(job_id)}" if base else None

    def admins(self) -> list[str]:
        return [a.strip() for a in self.admin_emails.split(",") if a.strip()]

    def artifacts(self) -> Path:
        if self.artifacts_dir is not None:
            return self.artifacts_dir
        from jobs.database import home

        return home() / "artifacts"

    def portal_urls(self) -> dict[str, str]:
        base = self.standin_url.rstrip("/")
        urls = {"bc_corporate_online": f"{base}/bc", "irs_ein": f"{base}/irs",
                "delaware_icis": f"{base}/delaware", "crtc": f"{base}/crtc"}
        for key, value in os.environ.items():
            if key.startswith("PORTALQ_PORTAL_URL_"):
                urls[key.removeprefix("PORTALQ_PORTAL_URL_").lower()] = value
        return urls

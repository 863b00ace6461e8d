"""The ``PORTALQ_*`` settings, one class per section; :class:`Settings` is all of them.

A field is named for its variable without the prefix (``workers``: ``PORTALQ_WORKERS``);
its description is what docs/reference/settings.md says of it (docs/gen/settings_ref.py)."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator

from portalq.jobs.settings.irs import IrsDesigneeSettings
from portalq.jobs.settings.section import Section

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
#: above it a read buffer cannot be sized (1e30: OverflowError) and PostgreSQL's jsonb
#: refuses the value anyway (at most 255 MiB)
MAX_PAYLOAD_BYTES_LIMIT = 255 * 1024 * 1024
DEFAULT_SCHEMA = "portalq"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class DatabaseSettings(Section):
    title: ClassVar[str] = "Database"

    database_url: str | None = Field(None, description="PostgreSQL URL (postgresql://user:"
                                     "pass@host/db; percent-encode / ? # % in the user or "
                                     "password; several hosts for failover); unset: the "
                                     "embedded server in PORTALQ_HOME")
    direct_database_url: str | None = Field(
        None, description="PostgreSQL itself, when database_url is a transaction pooler "
        "(PgBouncer in transaction mode): LISTEN, the leader's advisory lock and migrations "
        "use it, and prepared statements are off on database_url; unset: database_url")
    db_schema: str = Field(DEFAULT_SCHEMA, validation_alias="PORTALQ_SCHEMA",
                           description="the schema holding every object of portalq "
                           "(tables, functions, its alembic version table): a lower-case "
                           "name, never public or pg_*")
    connect_timeout_seconds: float = Field(10.0, gt=0, le=3600, description="longest wait "
                                           "for a database connection to open, then exit 4 "
                                           "or a retry (libpq counts whole seconds, at "
                                           "least 2)")

    @field_validator("db_schema")
    @classmethod
    def _ownable(cls, value: str) -> str:
        name = value.strip()
        if not _SCHEMA_NAME.fullmatch(name) or name in ("public", "pg_catalog",
                                                         "information_schema"):
            raise ValueError(f"{name!r} is not a schema portalq can own (a lower-case name "
                             "of letters, digits and _, not public or pg_*)")
        if name.startswith("pg_"):
            raise ValueError(f"{name!r}: names starting pg_ are PostgreSQL's")
        return name


class FilesSettings(Section):
    title: ClassVar[str] = "Files, folders and secrets"

    home: Path | None = Field(None, description="portalq's own folder: the embedded "
                              "database, the key file, artifacts (default: the user data "
                              "folder, e.g. ~/.local/share/portalq)")
    config: Path | None = Field(None, description="a .env-style file of PORTALQ_* settings, "
                                "read after the environment")
    secrets_dir: Path | None = Field(None, description="a folder of secret files (mode 0600):"
                                     " portalq_<setting> for any setting, account_<portal>_"
                                     "<account>_<key> for account secrets")
    artifacts_dir: Path | None = Field(None, description="screenshots and traces "
                                       "(default: PORTALQ_HOME/artifacts)")


class ServiceSettings(Section):
    title: ClassVar[str] = "Service"

    node_id: str = Field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}",
                         description="this process's name in lock_owner and events "
                         "(default: host:pid)")
    workers: int = Field(4, ge=1, le=256, description="jobs run concurrently by this process")
    portals: str = Field("", description="comma-separated portals this node claims jobs of "
                         "(its role; portalq run --portals); empty: all")
    job_types: str = Field("", description="comma-separated job types this node claims "
                           "(its role; portalq run --job-types); empty: all")
    tick_seconds: float = Field(60.0, gt=0, description="period of the maintenance tick")
    claim_batch: int = Field(50, ge=1, description="jobs claimed per round trip")
    poll_seconds: float = Field(1.0, gt=0, description="idle re-check for jobs coming due")
    heartbeat_seconds: float = Field(10.0, gt=0, description="a running job's heartbeat "
                                     "period")
    stale_after_seconds: float = Field(60.0, gt=0,
                                       description="a running job without heartbeat this "
                                       "long is rescued")
    job_timeout_seconds: float = Field(900.0, gt=0, description="a handler running longer "
                                       "is cancelled and retried")
    retry_base_seconds: float = Field(30.0, gt=0, description="retry backoff: "
                                      "base·2^(attempt-1), half jittered, capped at "
                                      "PORTALQ_RETRY_CAP_SECONDS")
    retry_cap_seconds: float = Field(3600.0, gt=0, description="longest retry backoff")
    crash_limit: int = Field(3, ge=0, description="rescues after a worker died that refund "
                             "the attempt; one more escalates the job as 'crashing'")
    reconnect_cap_seconds: float = Field(1.0, gt=0, description="longest wait between "
                                         "reconnect attempts to the database (the first: "
                                         "50 ms, jittered)")
    grace_seconds: float = Field(30.0, ge=0, description="SIGTERM: time running jobs get to "
                                 "finish before they are released")
    approval: str = Field("", description="comma-separated job types or portals whose jobs "
                          "stop at the review page for an admin's approval before they submit; "
                          "only those whose flow has that stop (process_crtc, crtc): "
                          "`portalq run` refuses any other name")
    question_deadline_seconds: float = Field(600.0, gt=0, le=86400, description="how long "
                                             "a flow waits for a person's answer (an "
                                             "e-mailed code, portalq jobs answer) before its "
                                             "attempt is refunded")
    browser_hold_seconds: float = Field(0.0, ge=0, le=86400, description="how long a "
                                        "flow stopped on a page it does not know keeps its "
                                        "browser for a person to take over from the console "
                                        "(0 = not kept, the default: the portal's "
                                        "drift pause waits for the hold's end; e.g. 600); "
                                        "keep it below PORTALQ_JOB_TIMEOUT_SECONDS, which "
                                        "cuts it short")
    held_browsers: int = Field(2, ge=0, description="browsers a node keeps held for a "
                               "person at once; a stop beyond them goes to the people "
                               "queue at once (each holds a worker and ~50 MB)")
    log_format: str = Field("text", pattern="^(text|json)$", description="text (key=value) "
                            "or json (one object per line)")
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING, ERROR or CRITICAL")
    metrics_port: int = Field(0, ge=0, le=65535,
                              description="Prometheus /metrics and /health; 0 = off")
    metrics_host: str = Field("127.0.0.1", description="address the metrics port listens on")

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return value.upper()


class JobSettings(Section):
    title: ClassVar[str] = "Jobs, plugins and orders"

    plugins: str = Field("", description="comma-separated modules every command imports; "
                         "they declare job types, handlers and portals (also: the "
                         "portalq.plugins entry-point group)")
    max_payload_bytes: int = Field(DEFAULT_MAX_PAYLOAD_BYTES, description="the largest "
                                   "payload (JSON, in bytes) a job may carry; at most "
                                   "255 MiB")
    order_sql_timeout: float = Field(10.0, description="statement timeout in seconds of a "
                                     "PORTALQ_ORDER_SQL_<JOB_TYPE> query (0.001 to 3600)")

    @field_validator("max_payload_bytes", mode="before")
    @classmethod
    def _payload_limit(cls, value: object) -> int:
        raw = str(value).strip()
        try:
            number = int(raw) if len(raw) <= 20 else 0   # int() of 5000 digits: ValueError
        except ValueError:
            number = 0
        if not 1 <= number <= MAX_PAYLOAD_BYTES_LIMIT:
            raise ValueError(f"must be an integer from 1 to {MAX_PAYLOAD_BYTES_LIMIT}, "
                             f"got {raw[:40]!r}")
        return number

    @field_validator("order_sql_timeout", mode="before")
    @classmethod
    def _order_timeout(cls, value: object) -> float:
        raw = str(value).strip()
        try:
            seconds = float(raw)
        except ValueError:
            seconds = -1.0
        if not 0.001 <= seconds <= 3600:
            raise ValueError(f"must be seconds between 0.001 and 3600, got {raw[:40]!r}")
        return seconds


class RetentionSettings(Section):
    title: ClassVar[str] = "Retention"

    retention_days: float = Field(30.0, gt=0, description="completed and cancelled jobs and "
                                  "their artifact folders are pruned after this many days")
    secret_retention_days: float = Field(30.0, gt=0, description="a failed job's secret "
                                         "values (SSNs...) kept for an admin retry, then "
                                         "erased; completed/cancelled jobs' at once")
    failed_retention_days: float = Field(90.0, ge=0, description="failed jobs deleted this "
                                         "long after failing; 0 = kept until handled")


class BreakerSettings(Section):
    title: ClassVar[str] = "Portal outages (circuit breaker)"

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


class MailSettings(Section):
    title: ClassVar[str] = "Escalation mail"

    admin_emails: str = Field("", description="comma-separated escalation recipients")
    smtp_url: str = Field("smtp://127.0.0.1:8025", description="smtp://[user:pass@]host:port"
                          " (smtps:// for TLS; ?starttls=1 for STARTTLS)")
    mail_from: str = Field("portalq@localhost", description="the mails' From address")
    mail_gather_seconds: float = Field(30, ge=0, le=600, description="a failed job's "
                                       "escalation mail waits this long for others of the "
                                       "same cause, so one outage is one mail listing its "
                                       "jobs (0: no wait)")
    mail_thread_minutes: float = Field(60, ge=0, le=7 * 24 * 60, description="a cause "
                                       "mailed this recently is not a new incident: its "
                                       "later jobs are mailed as replies in its thread "
                                       "(0: each gathering a thread of its own)")
    mail_reply_seconds: float = Field(120, ge=0, le=3600, description="a reply in a "
                                      "cause's thread waits this long for more of its jobs, "
                                      "so a recurring cause sends at most one mail this often")
    console_url: str = Field("", description="the admin console's address as admins reach "
                             "it, http:// or https:// (e.g. https://portalq.internal:8780); "
                             "escalation mails link to the job's page there")

    @field_validator("console_url")
    @classmethod
    def _http_only(cls, value: str) -> str:
        """The mails' links start with it: http(s) and a host, nothing else (a
        ``javascript:`` address made every link in every mail a script)."""
        text = value.strip()
        if not text:
            return value
        scheme, sep, rest = text.partition("://")
        host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
        if not sep or scheme.lower() not in ("http", "https") or not host \
                or any(not ch.isprintable() or ch.isspace() for ch in text):
            raise ValueError("must be an http:// or https:// address with a host (e.g. "
                             "https://portalq.internal:8780)")
        return value


class WebhookSettings(Section):
    title: ClassVar[str] = "Webhooks"

    webhook_timeout_seconds: float = Field(10.0, gt=0, le=300, description="the deadline of "
                                           "one webhook attempt, whole: connecting, sending "
                                           "and the answer's status line (a receiver that "
                                           "trickles its answer is cut there)")
    webhook_private_addresses: str = Field(
        "loopback", pattern="^(loopback|none|all)$",
        description="which private addresses a webhook URL may name (checked at "
        "`webhooks add` and, for a host name, at each attempt): loopback (127.0.0.0/8, ::1: "
        "an app on this host), none, or all (the private network and link-local ones too, "
        "169.254.169.254 a cloud's metadata among them)")


class BrowserSettings(Section):
    title: ClassVar[str] = "Browsers and portals"

    browser_ws: str = Field("", description="remote Playwright browser (ws://...) instead of a "
                            "local Chromium; per portal: PORTALQ_BROWSER_WS_<CODE>")
    browser_max_contexts: int = Field(0, ge=0, description="open contexts per remote browser "
                                      "endpoint at once, from this process (0: no cap)")
    browser_connect_timeout_seconds: float = Field(30.0, gt=0, description="connecting to a "
                                                   "remote browser server gives up after this")
    playwright_config: Path | None = Field(None, description="the browser configuration "
                                           "(TOML; default: the repository's "
                                           "playwright.config, else built-in defaults)")
    standin_url: str = Field("", description="point the built-in portals at the stand-ins "
                             "served there (demo and tests only; e.g. http://127.0.0.1:8765). "
                             "Empty: each portal's own address (portals.url); per portal: "
                             "PORTALQ_PORTAL_URL_<CODE>")


class KeySettings(Section):
    title: ClassVar[str] = "Encryption keys"

    key_provider: str = Field("", description="file, env or vault-transit; empty: env when "
                              "PORTALQ_KEK is set, else file")
    kek: SecretStr | None = Field(None, description="key-encryption keys "
                                  "id:base64key[,id:base64key...] (the first is current)")
    hmac_key: SecretStr | None = Field(None, description="the HMAC key (base64) for "
                                       "PORTALQ_KEK or Vault Transit")
    key_file: Path | None = Field(None, description="the key file (default: "
                                  "PORTALQ_HOME/keys.json)")
    vault_token_file: Path | None = Field(None, description="a file holding the Vault token, "
                                          "re-read when it changes (else VAULT_TOKEN_FILE or "
                                          "VAULT_TOKEN)")
    vault_transit_key: str = Field("portalq", description="the Transit key wrapping data keys")
    vault_transit_mount: str = Field("transit", description="the Transit engine's mount")
    vault_hmac_key: str | None = Field(None, description="the Transit key whose HMAC key "
                                       "portalq fetches (default: <vault_transit_key>-hmac)")


class TestSettings(Section):
    title: ClassVar[str] = "Tests and demos only"
    __test__: ClassVar[bool] = False   # not a pytest class
    #: read when portalq is imported (the clock), before a command can say anything in one
    #: line: the secret files are checked by the sections a command then reads
    check_secret_files: ClassVar[bool] = False

    frozen_now: str | None = Field(None, description="an ISO 8601 instant portalq's one "
                                   "clock stands at (with a UTC offset; tests, drills)")
    clock_offset_s: float | None = Field(None, description="seconds added to the wall clock "
                                         "(tests, drills)")
    portal_check_seconds: float | None = Field(None, description="replaces every portal "
                                               "check interval and its cap")
    lost_answer_window_seconds: float | None = Field(None, description="replaces every "
                                                     "lost-answer window")
    irs_processing_timeout: float | None = Field(None, description="seconds the IRS flow "
                                                 "waits for the answer to Submit EIN Request "
                                                 "(unset: 150)")


class Settings(DatabaseSettings, FilesSettings, ServiceSettings, JobSettings,
               RetentionSettings, BreakerSettings, MailSettings, WebhookSettings,
               BrowserSettings, KeySettings, IrsDesigneeSettings, TestSettings):
    """Every ``PORTALQ_*`` setting but the console's (:class:`ConsoleSettings`)."""

    title: ClassVar[str] = "All"

    def admins(self) -> list[str]:
        return [a.strip() for a in self.admin_emails.split(",") if a.strip()]

    def job_url(self, job_id: int) -> str | None:
        """The console page of a job (None without PORTALQ_CONSOLE_URL)."""
        base = self.console_url.strip().rstrip("/")
        return f"{base}/jobs/{int(job_id)}" if base else None


#: the sections in the order docs/reference/settings.md lists them
SECTIONS: tuple[type[Section], ...] = (
    DatabaseSettings, FilesSettings, ServiceSettings, JobSettings, RetentionSettings,
    BreakerSettings, MailSettings, WebhookSettings, BrowserSettings, KeySettings,
    IrsDesigneeSettings,
    TestSettings)

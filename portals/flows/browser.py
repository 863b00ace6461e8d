"""Browser settings (``playwright.config``), browser launch/connect, traced contexts.

    config = load_config()                       # PORTALQ_PLAYWRIGHT_CONFIG or the repo's file
    browser = await launch(playwright, config)   # local Chromium, or connect to ws_endpoint
    context = await new_context(browser, config, artifacts_dir)   # timeouts, tracing
    async with untraced(context, secrets=[ssn]): ...              # sensitive steps
    await close_context(context, failed=False)   # trace -> artifacts_dir/trace.zip per policy

Why ``untraced`` stops the whole trace instead of using ``tracing.stop_chunk`` /
``start_chunk``: a chunk boundary does not reset the network log. Playwright keeps
recording requests (with POST bodies) between chunks and writes them into the next
chunk's ``trace.network`` — a form POST made "between chunks" still lands in the trace
(checked against Playwright 1.65; ``tests/browser/test_tracing.py`` keeps checking). So each
traced stretch is its own trace (``tracing.start`` / ``tracing.stop``), and the stretches
are merged into one ``trace.zip`` at the end (the trace viewer loads every ``*.trace`` in
an archive). Tracing resumes after an untraced block only if no page still shows a secret
(the first snapshot after resuming records the current DOM, input values included).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tomllib
import uuid
import warnings
import weakref
import zipfile
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portalq.jobs import settings
from portalq.portals.flows.masking import page_shows, redact

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext

log = logging.getLogger("portalq.browser")

CONFIG_ENV = "PORTALQ_PLAYWRIGHT_CONFIG"
WS_ENV = "PORTALQ_BROWSER_WS"
DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[2] / "playwright.config"
#: system Chromium builds by name, searched on PATH; for a headless launch first the
#: headless shell (Debian's chromium-headless-shell: the build Playwright itself launches
#: headless, the same engine without the desktop browser, about half the CPU)
HEADLESS_SHELL = "chromium-headless-shell"
SYSTEM_CHROMIUMS = ("chromium", "chromium-browser")
TRACE_POLICIES = ("on", "off", "retain-on-failure")
DEFAULT_ARGS = ("--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run")


@dataclass(frozen=True)
class BrowserConfig:
    headless: bool = True
    executable_path: str = ""
    args: tuple[str, ...] = DEFAULT_ARGS
    #: Chromium's sandbox (off only where it cannot run: as root, or without user namespaces)
    sandbox: bool = True
    ws_endpoint: str = ""
    expose_network: str = ""
    action_ms: int = 15_000
    navigation_ms: int = 30_000
    trace_policy: str = "retain-on-failure"
    trace_screenshots: bool = True
    trace_snapshots: bool = True
    #: the file this was read from ("" = built-in defaults)
    source: str = field(default="", compare=False)

    def with_(self, **changes: Any) -> BrowserConfig:
        return replace(self, **changes)


# section -> key -> (attribute, type)
_KEYS: dict[str, dict[str, tuple[str, type]]] = {
    "browser": {"headless": ("headless", bool), "executable_path": ("executable_path", str),
                "args": ("args", list), "sandbox": ("sandbox", bool),
                "ws_endpoint": ("ws_endpoint", str),
                "expose_network": ("expose_network", str)},
    "timeouts": {"action_ms": ("action_ms", int), "navigation_ms": ("navigation_ms", int)},
    "trace": {"policy": ("trace_policy", str), "screenshots": ("trace_screenshots", bool),
              "snapshots": ("trace_snapshots", bool)},
}


# sections older files may still have: accepted with a warning
_RETIRED = {"artifacts": "the retention of screenshots and traces is PORTALQ_RETENTION_DAYS"}


def parse_config(data: Mapping[str, Any], source: str = "") -> BrowserConfig:
    """A :class:`BrowserConfig` from parsed TOML; unknown keys and bad values are errors."""
    values: dict[str, Any] = {}
    for section, table in data.items():
        if section in _RETIRED:
            warnings.warn(f"{source or 'playwright.config'}: [{section}] is ignored: "
                          f"{_RETIRED[section]}", DeprecationWarning, stacklevel=2)
            continue
        keys = _KEYS.get(section)
        if keys is None or not isinstance(table, Mapping):
            raise ValueError(f"{source or 'playwright.config'}: unknown section [{section}]")
        for key, value in table.items():
            if key not in keys:
                raise ValueError(f"{source or 'playwright.config'}: unknown key {section}.{key}")
            attr, kind = keys[key]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ValueError(f"{source or 'playwright.config'}: {section}.{key} must be "
                                 f"{kind.__name__}, got {value!r}")
            if isinstance(value, list):
                if not all(isinstance(a, str) for a in value):
                    raise ValueError(f"{source}: {section}.{key} must be a list of strings")
                value = tuple(value)
            values[attr] = value
    config = BrowserConfig(source=source, **values)
    if config.trace_policy not in TRACE_POLICIES:
        raise ValueError(f"{source or 'playwright.config'}: trace.policy must be one of "
                         f"{', '.join(TRACE_POLICIES)}, got {config.trace_policy!r}")
    if config.action_ms <= 0 or config.navigation_ms <= 0:
        raise ValueError(f"{source or 'playwright.config'}: timeouts must be positive")
    return config


def load_config(path: str | os.PathLike[str] | None = None,
                env: Mapping[str, str] | None = None) -> BrowserConfig:
    """Read ``path``, else ``$PORTALQ_PLAYWRIGHT_CONFIG``, else the repo's ``playwright.config``.

    The default file missing (e.g. an installed package) means built-in defaults; a file
    named explicitly must exist. ``$PORTALQ_BROWSER_WS`` overrides ``ws_endpoint``.
    """
    if env is None:
        knobs = settings.current(settings.BrowserSettings)
        env = {CONFIG_ENV: str(knobs.playwright_config or ""), WS_ENV: knobs.browser_ws}
    explicit = path or env.get(CONFIG_ENV)
    target = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    if target.is_file():
        with target.open("rb") as fh:
            try:
                data = tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"{target}: not valid TOML: {exc}") from None
        config = parse_config(data, str(target))
    elif explicit:
        raise FileNotFoundError(f"playwright config not found: {target}")
    else:
        config = BrowserConfig()
    if env.get(WS_ENV):
        config = config.with_(ws_endpoint=env[WS_ENV])
    return config


def resolve_executable(playwright: Any, config: BrowserConfig) -> str | None:
    """The Chromium to launch: configured path; None = Playwright's bundled one; else system."""
    if config.executable_path:
        return config.executable_path
    with suppress(Exception):
        if Path(playwright.chromium.executable_path).exists():
            return None
    return system_chromium(headless=config.headless)


def system_chromium(*, headless: bool) -> str | None:
    """The system's Chromium on PATH (for a headless launch its headless shell if there)."""
    for name in ((HEADLESS_SHELL,) if headless else ()) + SYSTEM_CHROMIUMS:
        if found := shutil.which(name):
            return found
    return None


class BrowserUnavailable(RuntimeError):
    """A remote browser server could not be used (unreachable, timed out, refused): not
    the job's fault -- the runner refunds the attempt."""


class BrowserVersionMismatch(BrowserUnavailable):
    """The browser server runs another Playwright release than this node."""


class BrowserKilledAtLaunch(RuntimeError):
    """The local Chromium was killed by a signal from outside (an operator, the OOM killer)
    while it was being launched: like a browser killed mid-flow, not the job's fault --
    the runner refunds the attempt. A Chromium that exits with a code, or crashes by its
    own fault (SIGSEGV, SIGABRT, SIGTRAP), is not this: it would fail again every time, so
    it spends attempts and ends in an escalation instead of a job waiting forever."""


#: signals that come from outside the browser; Playwright's launch log ends with
#: "<process did exit: exitCode=null, signal=SIGKILL>"
_KILLED = re.compile(r"process did exit: exitCode=null, signal=(SIGKILL|SIGTERM|SIGINT|SIGHUP)\b")


def killed_at_launch(exc: BaseException) -> str | None:
    """The signal that killed Chromium during ``exc``'s launch, if one from outside did."""
    if "has been closed" not in str(exc):   # Playwright's TargetClosedError
        return None
    found = _KILLED.search(str(exc))
    return found.group(1) if found else None


def playwright_version() -> str:
    return version("playwright")


async def connect(playwright: Any, config: BrowserConfig, endpoint: str | None = None, *,
                  timeout_s: float = 30.0) -> Any:
    """A Browser of the ``playwright run-server`` at ``endpoint`` (default
    ``config.ws_endpoint``), within ``timeout_s``.

    The server compares the client's Playwright release (major.minor, sent in the
    User-Agent) with its own and refuses another one (HTTP 428): that refusal becomes
    :class:`BrowserVersionMismatch` with both versions; any other failure to connect,
    :class:`BrowserUnavailable`.
    """
    endpoint = endpoint or config.ws_endpoint
    # run-server reads launch options from this header (args/executablePath only
    # with --unsafe); a launch-options query parameter in the URL takes precedence.
    options: dict[str, Any] = {"headless": config.headless}
    if config.args:
        options["args"] = list(config.args)
    if config.executable_path:
        options["executablePath"] = config.executable_path
    try:
        return await playwright.chromium.connect(
            endpoint, timeout=timeout_s * 1000,
            headers={"x-playwright-launch-options": json.dumps(options)},
            expose_network=config.expose_network or None)
    except Exception as exc:
        text = str(exc)
        server = re.search(r"server version: v?(\d+\.\d+)", text)
        if server or "428 Precondition Required" in text:
            ours = playwright_version()
            release = ".".join(ours.split(".")[:2])
            theirs = server.group(1) if server else "another release"
            raise BrowserVersionMismatch(
                f"browser server {endpoint} runs Playwright {theirs}, this node runs "
                f"{release} ({ours}): run the server from the same release "
                f"(pip install 'playwright=={release}.*'; python -m playwright run-server)"
            ) from None
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        raise BrowserUnavailable(f"browser server {endpoint}: {first[:300]}") from None


async def launch(playwright: Any, config: BrowserConfig) -> Any:
    """A Browser: connected to ``config.ws_endpoint`` if set, else launched locally. A
    local Chromium killed from outside while starting: :class:`BrowserKilledAtLaunch`."""
    if config.ws_endpoint:
        return await connect(playwright, config, timeout_s=config.navigation_ms / 1000)
    try:
        return await _launch_local(playwright, config)
    except Exception as exc:
        signal = killed_at_launch(exc)
        if signal is None:
            raise
        raise BrowserKilledAtLaunch(
            f"browser killed while it was being launched ({signal})") from exc


async def _launch_local(playwright: Any, config: BrowserConfig) -> Any:
    executable = resolve_executable(playwright, config)
    kwargs: dict[str, Any] = {"headless": config.headless, "args": list(config.args),
                              "chromium_sandbox": _sandbox(config)}
    try:
        try:
            return await playwright.chromium.launch(executable_path=executable, **kwargs)
        except Exception as exc:
            if not kwargs["chromium_sandbox"] or "sandbox" not in str(exc).lower():
                raise
            _no_sandbox_warning("Chromium's sandbox cannot start here (no user namespaces?)")
            kwargs["chromium_sandbox"] = False
            return await playwright.chromium.launch(executable_path=executable, **kwargs)
    except Exception as exc:
        fallback = system_chromium(headless=config.headless)
        if executable is not None or fallback is None or "Executable doesn't exist" not in str(exc):
            raise
        log.info("bundled Chromium incomplete; launching %s", fallback)
        return await playwright.chromium.launch(executable_path=fallback, **kwargs)


#: evidence that could not be made, one JSON line each ({"what", "reason"}); the runner
#: records them as missing evidence (never as a failure)
MISSING_EVIDENCE = "missing-evidence.jsonl"


#: what a kept evidence file leaves out, one JSON line each ({"file", "note"}): e.g. the
#: stretches of a trace stopped for personal data; recorded as that artifact's note
EVIDENCE_NOTES = "evidence-notes.jsonl"


def note_evidence(folder: Path, file: Path, note: str) -> None:
    with suppress(OSError):
        with open(folder / EVIDENCE_NOTES, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"file": file.name, "note": note}) + "\n")


def evidence_notes(folder: Path) -> dict[str, str]:
    """The notes of a folder's evidence files, by file name."""
    notes: dict[str, str] = {}
    with suppress(OSError):
        for line in (folder / EVIDENCE_NOTES).read_text(encoding="utf-8").splitlines():
            with suppress(ValueError, TypeError, KeyError):
                entry = json.loads(line)
                notes[str(entry["file"])] = str(entry["note"])[:500]
    return notes


def note_missing(folder: Path, what: str, exc: BaseException | str) -> None:
    """Record that a screenshot or trace could not be made. Evidence never decides an
    outcome: callers go on as if it had been made."""
    reason = exc if isinstance(exc, str) else (str(exc).strip().splitlines() or [""])[0]
    reason = (reason or type(exc).__name__)[:200]
    log.warning("evidence missing: %s (%s)", what, reason)
    with suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / MISSING_EVIDENCE, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"what": what, "reason": reason}) + "\n")
_warned: set[str] = set()


def _no_sandbox_warning(why: str) -> None:
    if why not in _warned:   # once per process
        _warned.add(why)
        log.warning("%s: Chromium runs WITHOUT its sandbox. Run portalq as a non-root user "
                    "to keep it (see docs/concepts/data-protection.md)", why)


def _sandbox(config: BrowserConfig) -> bool:
    """Whether to launch Chromium sandboxed: on by default; Chromium refuses its sandbox to
    root, so as root it is off, said once (a log warning)."""
    if not config.sandbox or "--no-sandbox" in config.args:
        _no_sandbox_warning("the sandbox is turned off in the browser settings")
        return False
    if os.geteuid() == 0:
        _no_sandbox_warning("running as root")
        return False
    return True


class _Trace:
    """The traced stretches of one context; merged into one zip when the context closes.

    Every context traces under a name of its own: the browser (shared by every worker of
    a process) keeps a tracing context's intermediate files under that name, so two
    contexts with one name overwrite each other's files. A stretch that cannot be started
    or saved ends tracing for the context and is recorded as missing evidence; its partial
    file is removed."""

    def __init__(self, context: BrowserContext, config: BrowserConfig, artifacts_dir: Path) -> None:
        self.context = context
        self.config = config
        self.artifacts_dir = artifacts_dir
        self.name = f"ctx-{uuid.uuid4().hex}"
        self.parts: list[Path] = []
        self.active = False
        self.lost: str | None = None   # why (part of) the trace could not be made
        self.secrets: set[str] = set()  # values redacted from the archive (trace_secrets)
        #: untraced blocks (personal data, credentials), and whether tracing stayed off
        #: after one: the kept trace says what it leaves out
        self.gaps = 0
        self.stayed_off = False

    async def start(self) -> None:
        if self.lost is not None:
            return
        try:
            await self.context.tracing.start(
                name=f"{self.name}-part{len(self.parts) + 1}",
                screenshots=self.config.trace_screenshots,
                snapshots=self.config.trace_snapshots)
        except Exception as exc:  # noqa: BLE001 - evidence never decides an outcome
            self._lose(exc)
            return
        self.active = True

    async def stop(self) -> None:
        if not self.active:
            return
        self.active = False
        part = self.artifacts_dir / f".{self.name}-part{len(self.parts) + 1}.zip"
        try:
            await self.context.tracing.stop(path=str(part))
        except Exception as exc:  # noqa: BLE001 - evidence never decides an outcome
            part.unlink(missing_ok=True)
            self._lose(exc)
            return
        self.parts.append(part)

    def _gap_note(self) -> str:
        n = self.gaps
        note = (f"not traced: {n} stretch{'es' if n > 1 else ''} whose pages showed personal "
                "data or credentials (an SSN, a password; see the screenshots)")
        if self.stayed_off:
            note += ("; after the last one tracing stayed off to the end (a page still "
                     "showed it): the rest of the run, the submit included, is not in it")
        return note

    def _lose(self, exc: BaseException) -> None:
        self.lost = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        log.warning("trace stopped for this context: %s", self.lost)

    async def finish(self, failed: bool) -> Path | None:
        await self.stop()
        keep = self.config.trace_policy == "on" or failed
        target = None
        try:
            if keep and self.parts:
                target = _free_name(self.artifacts_dir, "trace", ".zip")
                merge_traces([p for p in self.parts if p.exists()], target, self.secrets)
                if self.gaps:
                    note_evidence(self.artifacts_dir, target, self._gap_note())
        except Exception as exc:  # noqa: BLE001 - evidence never decides an outcome
            if target is not None:
                target.unlink(missing_ok=True)
            target = None
            self.lost = self.lost or str(exc)[:200]
        finally:
            for part in self.parts:
                part.unlink(missing_ok=True)
        if keep and self.lost is not None:
            note_missing(self.artifacts_dir, "trace" if target is None else "part of the trace",
                         self.lost)
        return target


_traces: weakref.WeakKeyDictionary[Any, _Trace] = weakref.WeakKeyDictionary()


def trace_secrets(context: BrowserContext, values: Iterable[str]) -> None:
    """Values the context's trace must not keep (a session's cookies, a password): they are
    replaced by ``***`` when the trace is saved."""
    trace = _traces.get(context)
    if trace is not None:
        trace.secrets.update(v for v in values if v)


#: a context attribute: its traffic must leave through the portal's egress proxy
PROXIED = "portalq_proxied"


async def new_context(browser: Browser, config: BrowserConfig, artifacts_dir: Path,
                      **options: Any) -> Any:
    """A fresh BrowserContext with the configured timeouts, traced per the trace policy."""
    artifacts_dir = Path(artifacts_dir)
    try:
        artifacts_dir.mkdir(parents=True, exist_ok=True)
        folder = True
    except OSError as exc:   # evidence never decides an outcome: no folder, no trace
        note_missing(artifacts_dir, "evidence folder", exc)
        folder = False
    context = await browser.new_context(accept_downloads=True, **options)
    setattr(context, PROXIED, "proxy" in options)   # never_twice: not through Playwright's client
    context.set_default_timeout(config.action_ms)
    context.set_default_navigation_timeout(config.navigation_ms)
    if config.trace_policy != "off" and folder:
        trace = _Trace(context, config, artifacts_dir)
        await trace.start()
        _traces[context] = trace
    return context


async def close_context(context: BrowserContext, *, failed: bool = False) -> Path | None:
    """Close ``context``; its trace goes to ``artifacts_dir/trace.zip`` per the policy
    (``retain-on-failure``: only when ``failed``). Returns the trace's path, if kept."""
    trace = _traces.pop(context, None)
    try:
        return await trace.finish(failed) if trace else None
    except Exception as exc:  # noqa: BLE001 - evidence never decides an outcome
        note_missing(trace.artifacts_dir if trace else Path("."), "trace", exc)
        return None
    finally:
        with suppress(Exception):
            await context.close()


def is_tracing(context: BrowserContext) -> bool:
    trace = _traces.get(context)
    return bool(trace and trace.active)


@asynccontextmanager
async def untraced(context: BrowserContext, *, secrets: Iterable[str] = (),
                   resume: bool = True) -> AsyncIterator[None]:
    """Nothing inside the block is traced (actions, fill values, DOM, network, screencast).

    Tracing resumes after the block only if ``resume``, it ended normally and no page of the
    context still shows one of ``secrets``; otherwise it stays off for the rest of the
    context (``resume=False``: the flow knows its pages show personal data from there on
    in forms the secrets check cannot see, such as an SSN's last four digits).
    """
    trace = _traces.get(context)
    if trace is None or not trace.active:
        yield
        return
    await trace.stop()
    trace.gaps += 1
    trace.stayed_off = True     # until it resumes below
    yield
    if not resume:
        return
    secrets = [s for s in secrets if s]
    if secrets and await pages_show(context, secrets):
        log.info("a page still shows sensitive data: tracing stays off for this context")
        return
    await trace.start()
    trace.stayed_off = not trace.active


_PAGE_TEXT_JS = """() => [document.documentElement.outerHTML, location.href,
  ...Array.from(document.querySelectorAll('input, textarea, select'), e => e.value)
].join('\\n')"""


async def pages_show(context: BrowserContext, secrets: Iterable[str]) -> bool:
    """True if a page of ``context`` (markup, input values or URL, or where screenshots
    mask it: :func:`page_shows`) contains a secret; True as well when a page cannot be
    read (err on the safe side)."""
    secrets = list(secrets)
    for page in context.pages:
        for frame in page.frames:
            try:
                text = await frame.evaluate(_PAGE_TEXT_JS)
            except Exception:  # noqa: BLE001 - navigating or crashed: cannot prove it clean
                return True
            if redact(text, secrets) != text:
                return True
        if await page_shows(page, secrets):   # generated content, shadow roots, canvases
            return True
    return False


def merge_traces(parts: list[Path], target: Path, secrets: Iterable[str] = ()) -> None:
    """One archive from several trace zips: part N's ``trace.*`` become ``traceN.*``; every
    ``secrets`` value (e.g. a signed-in session's cookies, which every later request of the
    trace carries) replaced by ``***`` in every member."""
    forms = sorted({s.encode() for s in secrets if s and len(s) >= 6}, key=len, reverse=True)
    seen: set[str] = set()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for index, part in enumerate(parts):
            with zipfile.ZipFile(part) as zin:
                for name in zin.namelist():
                    new = name
                    if index and name.startswith("trace."):
                        new = f"trace{index + 1}.{name[len('trace.'):]}"
                    if new not in seen:
                        seen.add(new)
                        data = zin.read(name)
                        for form in forms:
                            data = data.replace(form, b"***")
                        out.writestr(new, data)


def _free_name(folder: Path, stem: str, suffix: str) -> Path:
    candidate, n = folder / f"{stem}{suffix}", 1
    while candidate.exists():
        n += 1
        candidate = folder / f"{stem}-{n}{suffix}"
    return candidate

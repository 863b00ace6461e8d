"""``portalq run``: the scheduler service (APScheduler tick + workers), one process."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from portalq.jobs import files, plugins
from portalq.jobs import settings as all_settings
from portalq.jobs.db.location import database_url, direct_database_url, home, libpq_dsn
from portalq.jobs.db.migrate import upgrade_if_needed
from portalq.jobs.operations import approvals
from portalq.portals.flows import browser
from portalq.portals.flows.remote_browsers import BrowserPool
from portalq.scheduler import (
    egress,
    job_context,
    logs,
    metrics,
    node_keys,
    search_indexer,
    webhook_sender,
)
from portalq.scheduler.calendar_cache import seed_declared_portals
from portalq.scheduler.config import Settings
from portalq.scheduler.tick import Tick
from portalq.scheduler.worker import Worker, make_pool
from portalq.scheduler.zonedata import check_zone_data

log = logging.getLogger("portalq.service")


async def serve(settings: Settings, *, ready: asyncio.Event | None = None,
                stop: asyncio.Event | None = None, install_signals: bool = True) -> None:
    check_zone_data()  # before anything: on old zone data every BC deferral is an hour off

    files.owner_only_process()   # artifacts, traces, mails: nobody else can read them
    files.private_dir(home())
    try:
        files.private_dir(settings.artifacts())
    except OSError as exc:   # evidence never decides an outcome: the jobs still run
        log.error("artifacts folder %s cannot be made (%s): jobs run, their evidence is "
                  "recorded as missing", settings.artifacts(),
                  (str(exc).splitlines() or [type(exc).__name__])[0][:300])

        job_context.said_no_folder()
    timeout = settings.connect_timeout_seconds
    url = database_url(settings.database_url, connect_timeout=timeout)
    # behind PgBouncer (transaction pooling) the pool goes through the pooler; what needs
    # a session of its own (LISTEN, the leader's advisory lock, migrations) goes direct
    direct_url = direct_database_url(settings.database_url, settings.direct_database_url,
                                     connect_timeout=timeout)
    await asyncio.to_thread(upgrade_if_needed, direct_url)
    node_keys.tell_missing_key_file()

    added = await asyncio.to_thread(seed_declared_portals, direct_url)
    if added:
        log.info("declared portals added: %s", ", ".join(added))
    direct = libpq_dsn(direct_url)
    pool = make_pool(settings, libpq_dsn(url))
    await pool.open(wait=True, timeout=60)
    worker = Worker(settings, pool, direct)
    endpoints = settings.browser_endpoints()
    if endpoints:

        # remote browsers per portal (or one for all): JobContext takes contexts from it
        worker.browsers.remote = BrowserPool(
            browser.load_config(), endpoints,
            max_contexts=settings.browser_max_contexts,
            connect_timeout_s=settings.browser_connect_timeout_seconds)
    tick = Tick(settings, worker, direct)
    try:
        await worker.refresh_portals()
        worker.role.check(worker.portals)   # unknown portal or job type: exit 2
        _say_where_portals_point(settings, worker.portals)
        worker.browsers.proxies = _egress(worker.portals)
    except BaseException:
        await pool.close()
        raise

    scheduler = AsyncIOScheduler(timezone="UTC")
    scheduler.add_job(tick.run, "interval", seconds=settings.tick_seconds, id="tick",
                      max_instances=1, coalesce=True,
                      # APScheduler paces real seconds; "now" inside the tick is the clock's
                      next_run_time=datetime.now(UTC))
    scheduler.start()

    stop = stop or asyncio.Event()
    if install_signals:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

    def health() -> dict[str, Any]:
        return {"ok": worker.healthy, "node": settings.node_id, "running": len(worker.running),
                "last_tick": tick.last_ok, "last_tick_summary": tick.last_summary}

    server = None
    if settings.metrics_port:
        async def refresh() -> None:
            async with pool.connection() as conn:
                await metrics.refresh_job_counts(conn)

        server = await metrics.serve(settings.metrics_host, settings.metrics_port, health,
                                     refresh)
    hooks = webhook_sender.Sender(settings, worker.pool, lambda: tick.leader.held)

    def on_outbox() -> None:   # an outbox row was written: mail or a webhook delivery
        tick.kick_outbox()
        hooks.kick()
    worker.on_outbox = on_outbox
    if install_signals:   # the process is the service's own: its heap is ours to settle
        settle_heap()
    loops = worker.start_loops()
    loops.append(asyncio.create_task(tick.outbox_loop(), name="outbox"))
    loops.append(asyncio.create_task(hooks.loop(), name="webhooks"))
    loops.append(asyncio.create_task(
        search_indexer.loop(worker.pool, lambda: tick.leader.held), name="search-index"))
    log.info("portalq running: node=%s workers=%d tick=%ss role: %s", settings.node_id,
             settings.workers, settings.tick_seconds, worker.role.describe())
    if ready is not None:
        ready.set()
    if install_signals:
        print(f"portalq ready node={settings.node_id}", flush=True)
    await stop.wait()
    log.info("stopping: no new jobs are claimed")
    scheduler.shutdown(wait=False)
    await worker.stop_loops(loops, settings.grace_seconds)
    if server is not None:
        server.close()
    await tick.close()
    await worker.close_browser()   # and the remote browsers' pool
    await pool.close()
    log.info("stopped")


def settle_heap() -> None:
    """Keep what startup made (modules, job types, calendars, the pool) out of the garbage
    collector's passes: collected once, then frozen (``gc.freeze``). A full pass over that
    heap is long, and the loops stand still meanwhile: a pickup that came in then
    waited for it (issue 19, bench/pickup_trace.py). Later objects are collected as
    before. Only for a process that is the service's own: frozen objects are never freed."""
    gc.collect()
    gc.freeze()


def _egress(portals: dict[str, Any]) -> dict[str, Any]:
    """Each portal's egress proxy, checked (unknown portal, password missing: exit 2) and
    logged like the portals' addresses, without credentials."""
    found = egress.proxies(all_settings.family(egress.PREFIX))
    egress.check(found, portals)
    for code, proxy in sorted(found.items()):
        log.info("portal %s: browser traffic through proxy %s", code, proxy.shown())
    return found


def _say_where_portals_point(settings: Settings, portals: dict[str, Any]) -> None:
    """A production start says which portals its flows will not drive for real."""
    redirected = settings.redirected_portals()
    if redirected:
        log.warning("portals pointed away from their own address (stand-ins or "
                    "PORTALQ_PORTAL_URL_*): %s",
                    ", ".join(f"{c} -> {u}" for c, u in sorted(redirected.items())))
    missing = sorted(c for c, p in portals.items()
                     if not p.url and c not in redirected and c != "email")
    if missing:
        log.warning("portals with no address (portals.url): %s; their browser jobs will "
                    "fail until one is set", ", ".join(missing))


def load_plugins(settings: Settings) -> None:
    """The same plugins every CLI command loads (jobs/plugins.py)."""
    plugins.load(settings.plugins)


def run(settings: Settings) -> None:
    check_zone_data()  # refuse to start before logging or migrating anything
    logs.setup(settings.log_format, settings.log_level)
    load_plugins(settings)
    approvals.check_setting(settings.approval)   # with the plugins' types, before the database
    asyncio.run(serve(settings))

"""Prometheus metrics and a health endpoint, served on PORTALQ_METRICS_PORT."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from portalq.jobs import readouts

REGISTRY = CollectorRegistry()
JOBS = Gauge("portalq_jobs", "Jobs by portal and status", ["portal", "status"],
             registry=REGISTRY)
FINISHED = Counter("portalq_job_outcomes_total", "Attempts finished, by outcome",
                   ["job_type", "portal", "outcome"], registry=REGISTRY)
DURATION = Histogram("portalq_job_duration_seconds", "Handler run time", ["job_type"],
                     registry=REGISTRY, buckets=(.01, .05, .1, .5, 1, 5, 15, 30, 60, 120, 300,
                                                 900))
LATENCY = Histogram("portalq_queue_latency_seconds", "Due time to start", ["portal"],
                    registry=REGISTRY, buckets=(.005, .01, .05, .1, .5, 1, 5, 30, 60, 300))
DEFERRALS = Counter("portalq_deferrals_total", "Jobs deferred (closed portal, limits)",
                    ["portal"], registry=REGISTRY)
ESCALATIONS = Counter("portalq_escalations_sent_total", "Escalation emails sent",
                      registry=REGISTRY)
RESCUED = Counter("portalq_rescued_total", "Stale running jobs rescued", registry=REGISTRY)
FENCED = Counter("portalq_fenced_flows_total", "Flows this node stopped because it could not "
                 "renew their heartbeats (self-fencing)", registry=REGISTRY)
DUTY_ERRORS = Counter("portalq_duty_errors_total", "Tick duties (or rows of them) that failed "
                      "and were skipped", ["duty"], registry=REGISTRY)
OUTBOX_ERRORS = Counter("portalq_outbox_errors_total", "Mails that could not be built or were "
                        "refused (the row is marked and retried later)", ["outbox"],
                        registry=REGISTRY)


@functools.lru_cache(maxsize=4096)
def labelled(metric: Any, *values: str) -> Any:
    """``metric.labels(*values)``, looked up once: the worker observes three labelled
    metrics per job, and each look-up has a cost (issue 19). Only for metrics whose children are
    never removed (not JOBS, cleared at every scrape)."""
    return metric.labels(*values)


async def refresh_job_counts(conn: Any) -> None:
    """The jobs-by-portal-and-status gauge, counted when /metrics is scraped (a scan of
    job_queue: kept out of the tick, which would pay it every period for nobody)."""
    JOBS.clear()
    for row in await readouts.adepth(conn):
        JOBS.labels(row["portal"], row["status"]).set(row["n"])


async def serve(host: str, port: int, health: Callable[[], dict[str, Any]],
                refresh: Callable[[], Awaitable[None]] | None = None) -> asyncio.Server:
    """A tiny HTTP server: GET /metrics (Prometheus text; ``refresh`` runs first),
    GET /health (JSON)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            path = request.split()[1].decode() if len(request.split()) > 1 else "/"
            if path.startswith("/metrics"):
                if refresh is not None:
                    with contextlib.suppress(Exception):  # stale counts beat no metrics
                        await refresh()
                body, ctype, status = generate_latest(REGISTRY), "text/plain; version=0.0.4", 200
            elif path.startswith("/health"):
                state = health()
                body = json.dumps(state).encode()
                ctype, status = "application/json", 200 if state.get("ok") else 503
            else:
                body, ctype, status = b"not found\n", "text/plain", 404
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: "
                         f"{len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)

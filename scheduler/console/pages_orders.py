"""The orders list and an order's page (issues 36, 48): every job of one of the business's
orders, its status, its result and its timeline -- what ``portalq orders show`` prints, for
every role, nothing secret (:mod:`jobs.business.results` scrubs it as the console's job
page does); an order of a declared kind also as a pipeline of its steps, each with its
state, ETA and deadline (:mod:`scheduler.console.orders_view`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from portalq.jobs.business import results
from portalq.scheduler.console import orders_view
from portalq.scheduler.console.security import require

if TYPE_CHECKING:
    from portalq.scheduler.console.app import Console


def order_url(order_id: Any) -> str:
    """The page of an order: its id one path segment (a ``/``, ``?`` or ``#`` in it
    escaped). An id a browser would take for a dot segment (``.``, ``..``) and drop from
    the path goes in the query instead."""
    text = str(order_id)
    if text.strip(".") == "":
        return f"/orders?{urlencode({'id': text})}"
    return "/orders/" + quote(text, safe="")


def timeline(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's transitions and what a person was asked or told about it, in time order."""
    lines: list[dict[str, Any]] = []
    for e in job["events"]:
        detail = e.get("detail") if isinstance(e.get("detail"), dict) else {}
        lines.append({"at": e["at"], "kind": "change", "attempt": e["attempt"],
                      "text": f"{e['from_status'] or '·'} → {e['to_status']}",
                      "note": detail.get("event") or "", "error": e["error"] or ""})
    for x in job["escalations"]:
        settled = " (resolved)" if x["resolved_at"] else ""
        lines.append({"at": x["created_at"], "kind": "person", "attempt": None,
                      "text": f"a person was told ({x['kind']}){settled}",
                      "note": x["reason"] or "", "error": ""})
    return sorted(lines, key=lambda line: line["at"])


def routes(console: Console) -> list[Route]:
    console.templates.env.filters["order_url"] = order_url
    latest = orders_view.Latest(console.settings.live_refresh_seconds,
                                lambda: console.snapshots.changes)

    async def page(request: Request) -> Response:
        require(request)
        order_id = request.path_params.get("order_id") or request.query_params.get("id")
        if order_id is None:
            return await listing(request)

        def load() -> tuple[results.OrderResult, dict[str, Any] | None]:
            with console.db() as conn:
                view = results.order(order_id, conn)   # JobNotFound: a 404 page
                return view, orders_view.pipeline(conn, order_id, latest)

        view, pipeline = await run_in_threadpool(load)
        return console.render(request, "order.html", order=view, pipeline=pipeline,
                              jobs={j["id"]: j for j in view["jobs"]},
                              timelines={j["id"]: timeline(j) for j in view["jobs"]})

    async def listing(request: Request) -> Response:
        def load() -> list[dict[str, Any]]:
            with console.db() as conn:
                return orders_view.listing(conn, latest)

        rows = await run_in_threadpool(load)
        return console.render(request, "orders.html", orders=rows,
                              shown=results.ORDERS_SHOWN)

    return [Route("/orders", page), Route("/orders/{order_id:path}", page)]

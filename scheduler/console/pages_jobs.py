"""Jobs: the filtered list (keyset pages, bulk retry/cancel), a job's page, its evidence
(screenshots, trace, documents) and its actions."""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Route

from portalq.jobs import queue, search_index, types
from portalq.jobs.admin import actions as console_actions
from portalq.jobs.admin import needs as console_needs
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin.users import User
from portalq.jobs.audit import Actor
from portalq.jobs.business.order_runs import HELD_UNTIL
from portalq.jobs.checkpoints import past_point_of_no_return
from portalq.jobs.clock import parse_instant
from portalq.jobs.errors import InputError
from portalq.jobs.kinds import JOB_STATUSES
from portalq.jobs.operations import portal_rows as portals_repo
from portalq.jobs.secrets import redaction as masking
from portalq.portals.bc import name_requests
from portalq.scheduler.console.pages_needs import back_to, portal_zones
from portalq.scheduler.console.security import require

if TYPE_CHECKING:
    from portalq.scheduler.console.app import Console

#: document types served as what they are (anything else: application/octet-stream)
DOCUMENT_TYPES = ("application/pdf",)
FILTERS = ("status", "portal", "job_type", "order_id", "created_from", "created_to", "field",
           "value")
DONE = {"retry": "Queued again.", "retry_with_payload": "Queued again with the new payload.",
        "retry_new_nr": "Queued again with the new names: it makes a new Name Request for "
                        "them (the finished one is kept as an earlier NR).",
        "cancel": "Cancelled.", "confirm_filed": "Completed as filed.",
        "not_filed": "Resumes from before its submission.",
        "answer": "Answer sent: the flow goes on with it.",
        "approve": "Approved: it runs again now and submits what was reviewed.",
        "reject": "Rejected: cancelled, nothing filed."}


def pending_approval(job: dict[str, Any]) -> dict[str, Any] | None:
    """A job waiting for approval as the approval block shows it: the review page's
    screenshot of the attempt that asked (not the failure shot its waiting ended with),
    the digest approving covers."""
    if not job.get("awaits_approval"):
        return None
    record = (job.get("checkpoint") or {}).get("approval") or {}
    asked = [e["attempt"] for e in job["escalations"] if e["kind"] == "approval"]
    attempt = asked[-1] if asked else job["attempts"]
    return {"job_id": job["id"], "job_type": job["job_type"],
            "review": console_needs.review_screenshot(job["artifacts"], attempt),
            "digest": str(record.get("digest") or ""), "changed": bool(record.get("changed"))}


def failure_screenshot(job: dict[str, Any]) -> dict[str, Any] | None:
    """A failed job's evidence first: its last attempt's failure screenshot (the one named
    for the failure, else that attempt's last screenshot), shown large beside the error."""
    if job["status"] != "failed":
        return None
    shots = [a for a in job["artifacts"] if a["kind"] == "screenshot"]
    if not shots:
        return None
    last = max(a["attempt"] for a in shots)
    shots = [a for a in shots if a["attempt"] == last]
    named = [a for a in shots if "failure" in str(a["path"]).rsplit("/", 1)[-1].lower()]
    shown: dict[str, Any] = (named or shots)[-1]
    return shown


#: what a retry of a job of this type does, from its payload and checkpoints (the flow
#: decides the same way): only retries that can work are offered and queued
RETRY_PLANS = {"name_search": name_requests.plan}


def retry_plan(job: Mapping[str, Any], payload: Mapping[str, Any] | None = None,
               ) -> name_requests.Plan | None:
    planner = RETRY_PLANS.get(job["job_type"])
    if planner is None or job["status"] not in ("failed", "cancelled"):
        return None
    return planner(job["payload"] if payload is None else payload, job["checkpoint"])


def actor(user: User) -> Actor:
    return Actor(user.name, user.role, "console")


def text_param(values: Any, name: str) -> str | None:
    """A text field of a query or form, stripped (None if empty); a control character
    (a NUL, which PostgreSQL's text cannot hold, a line break) is bad input, said in one
    line, never a 500."""
    v = values.get(name)
    if v is None:
        return None
    text = str(v).strip()
    if any(not ch.isprintable() for ch in text):
        raise InputError(f"{name}: control characters are not allowed")
    return text or None


def job_id_param(value: Any, name: str = "id") -> int:
    """A job id from a query or form: digits, within a job id's range (bigint)."""
    text = str(value).strip()
    if not text.isdigit() or not 0 < int(text) <= console_repo.MAX_ID:
        raise InputError(f"{name}: not a job id: {text[:30]!r}")
    return int(text)


def parse_filter(values: Any) -> console_repo.JobFilter:
    def get(name: str) -> str | None:
        return text_param(values, name)

    def instant(name: str) -> Any:
        v = get(name)
        if v is None:
            return None
        try:  # a datetime-local field has no offset: it is UTC here
            return parse_instant(v if ("Z" in v or "+" in v[10:]) else v + "Z")
        except ValueError as exc:
            raise InputError(f"{name}: {exc}") from None

    return console_repo.JobFilter(
        status=get("status"), portal=get("portal"), job_type=get("job_type"),
        order_id=get("order_id"), created_from=instant("created_from"),
        created_to=instant("created_to"), field=get("field"), value=get("value")).check()


def filter_query(values: Any) -> dict[str, str]:
    return {k: str(values[k]) for k in FILTERS if values.get(k)}


def form_reason(form: FormData) -> str:
    reason = str(form.get("reason") or "").strip()
    if not reason:
        raise InputError("say why (a reason is required for every action)")
    # a reason is shown to every role and kept in the audit log: never an SSN in it
    return str(masking.scrub_ssn_like(reason))


def routes(console: Console) -> list[Route]:
    def jobs_list(request: Request, as_json: bool = False) -> Response:
        user = require(request)
        q = request.query_params
        try:
            flt = parse_filter(q)
            before = q.get("before")
            before_id = job_id_param(before, "before") if before else None
        except InputError as exc:
            if as_json:
                raise
            # the list again, the message above its filters, all of them kept to correct
            query = {k: v for k, v in filter_query(q).items() if v.isprintable()}
            return list_page(request, user, console_repo.Page([], None, False, 0), query,
                             None, error=str(exc), status=400)
        with console.db() as conn:
            page = console_repo.jobs_page(conn, flt, before_id=before_id)
        query = filter_query(q)
        next_url = (f"/jobs?{urlencode({**query, 'before': page.next_before})}"
                    if page.next_before else None)
        if as_json:
            return console.json({"jobs": page.rows, "next": next_url, "partial": page.partial,
                                 "scanned": page.scanned})
        return list_page(request, user, page, query, next_url)

    def list_page(request: Request, user: User, page: console_repo.Page,
                  query: dict[str, str], next_url: str | None, *, error: str | None = None,
                  status: int = 200) -> Response:
        with console.db() as conn:
            portals = portals_repo.codes(conn)
            estimates, exact = console_repo.status_counts(conn)
            index = search_index.mark(conn)
        return console.render(request, "jobs.html", index=index, status=status, page=page,
                              query=query,
                              next_url=next_url, error=error, statuses=JOB_STATUSES,
                              portals=portals, job_types=types.names(),
                              can_act=user.can("operator"), filter_qs=urlencode(query),
                              estimates=estimates, exact=exact,
                              search_fields=console_repo.SEARCH_FIELDS,
                              search_min=console_repo.SEARCH_MIN, window=console_repo.WINDOW)

    def jobs_json(request: Request) -> Response:
        return jobs_list(request, as_json=True)

    def load(job_id: Any) -> dict[str, Any]:
        try:
            jid = int(job_id)
        except ValueError:
            raise HTTPException(404, "no such job") from None
        if not 0 < jid <= console_repo.MAX_ID:
            raise HTTPException(404, "no such job")
        with console.db() as conn:
            return console_repo.job_page(conn, jid)

    def job(request: Request) -> Response:
        user = require(request)
        data = load(request.path_params["job_id"])
        attempts: dict[int, list[dict[str, Any]]] = {}
        for a in data["artifacts"]:
            attempts.setdefault(a["attempt"], []).append(a)
        done = DONE.get(request.query_params.get("done", ""))
        uncertain = past_point_of_no_return(data["checkpoint"])
        with console.db() as conn:   # its times in the portal's zone too
            zone = portal_zones(conn).get(data["portal"])
        # an order's step held behind the steps before it: its last_error says what it
        # waits for (order_runs), which is no error
        held = data["status"] == "deferred" and data["run_at"] is not None \
            and data["run_at"] >= HELD_UNTIL
        return console.render(request, "job.html", job=data, attempts=attempts, done=done,
                              held_for=data["last_error"] if held else None,
                              zone=zone, failure_shot=failure_screenshot(data),
                              can_act=user.can("operator"), uncertain=uncertain,
                              a=pending_approval(data), back="", plan=retry_plan(data),
                              payload_json=json.dumps(data["payload"], indent=2,
                                                      sort_keys=True),
                              link=console.service.job_url(data["id"]))

    def job_json(request: Request) -> Response:
        require(request)
        data = load(request.path_params["job_id"])
        return console.json(data)

    def edit(request: Request) -> Response:
        require(request, "operator")
        data = load(request.path_params["job_id"])
        return console.render(request, "edit.html", job=data, mask=masking.MASK,
                              plan=retry_plan(data),
                              secrets=masking.secret_fields(data["job_type"]),
                              payload_json=json.dumps(data["payload"], indent=2,
                                                      sort_keys=True), error=None)

    async def act(request: Request) -> Response:
        user = require(request, "operator")
        job_id = request.path_params["job_id"]
        if not 0 < job_id <= console_repo.MAX_ID:
            raise HTTPException(404, "no such job")
        what: str = request.path_params["action"]
        form = await request.form()
        reason = form_reason(form)

        def run() -> str:
            with console.db() as conn:
                a = actor(user)
                if what == "retry":
                    console_actions.retry(conn, a, job_id, reason)
                elif what == "cancel":
                    console_actions.cancel(conn, a, job_id, reason, portal_checked=(
                        form.get("uncertain_ok") == "yes"))
                elif what == "confirm_filed":
                    console_actions.confirm_filed(conn, a, job_id, reason,
                                                  str(form.get("confirmation") or ""))
                elif what == "not_filed":
                    console_actions.not_filed(conn, a, job_id, reason)
                elif what == "answer":
                    console_actions.answer(conn, a, job_id, str(form.get("answer") or ""),
                                           reason)
                elif what in ("approve", "reject"):
                    console_actions.decide(conn, a, job_id,
                                           "approved" if what == "approve" else "rejected",
                                           reason)
                elif what == "retry_with_payload":
                    try:
                        edited = json.loads(str(form.get("payload") or ""))
                    except json.JSONDecodeError as exc:
                        raise InputError(f"payload is not valid JSON: {exc.msg} at line "
                                         f"{exc.lineno}") from None
                    if not isinstance(edited, dict):
                        raise InputError("payload must be a JSON object")
                    plan = retry_plan(queue.get_job(job_id, conn), edited)
                    if plan is not None and plan.refused:
                        raise InputError(plan.refused)
                    console_actions.retry_with_payload(conn, a, job_id, reason, edited)
                    if plan is not None and plan.new:
                        return "retry_new_nr"
                else:
                    raise HTTPException(404, "no such action")
            return what

        done = await run_in_threadpool(run)
        back = back_to(form.get("back"))   # started on the "Needs you" page: back there
        if back is not None:
            return RedirectResponse(f"{back}?{urlencode({'done': done, 'job': job_id})}",
                                    status_code=303)
        return RedirectResponse(f"/jobs/{job_id}?done={done}", status_code=303)

    async def bulk(request: Request) -> Response:
        """Preview (how many, which) and then, with confirm=yes, do it."""
        user = require(request, "operator")
        form = await request.form()
        action = str(form.get("action") or "")
        if action not in console_actions.BULK_STATES:
            raise InputError("choose retry, cancel or not filed")
        statuses = console_actions.BULK_STATES[action]
        # one field per job, or (a group on the "Needs you" page) one field of many ids
        many = " ".join(str(v) for v in form.getlist("ids")).split()
        selected = [job_id_param(v) for v in [*form.getlist("id"), *many] if str(v).strip()]
        scope_all = form.get("scope") == "filter"
        flt = parse_filter(form)
        def pick() -> list[int]:
            with console.db() as conn:
                if scope_all:
                    ids = console_repo.ids_matching(conn, flt, statuses,
                                                    console_actions.BULK_CAP + 1)
                else:
                    found = console_repo.statuses_of(conn, selected)
                    ids = [i for i, s in found.items() if s in statuses]
                if action == "not_filed":   # only submissions still in doubt
                    return console_actions.in_doubt(conn, ids)
                return ids

        ids = await run_in_threadpool(pick)
        if not ids:
            raise InputError(f"nothing to {action.replace('_', ' ')}: no selected job is "
                             f"{' or '.join(statuses)}"
                             f"{' with a submission in doubt' if action == 'not_filed' else ''}")
        if len(ids) > console_actions.BULK_CAP:
            raise InputError(f"the filter matches more than {console_actions.BULK_CAP} jobs "
                             "that can be acted on: narrow it")
        scope = ({"filter": filter_query(form)} if scope_all else {"selected": selected})
        if form.get("confirm") != "yes":
            def doubtful() -> list[int]:   # a cancel of filings in doubt asks first
                with console.db() as conn:
                    return console_actions.in_doubt(conn, ids)
            in_doubt = await run_in_threadpool(doubtful) if action == "cancel" else []
            return console.render(request, "bulk.html", action=action, ids=ids,
                                  count=len(ids), scope_all=scope_all, selected=selected,
                                  query=filter_query(form), statuses=statuses,
                                  reason=str(form.get("reason") or ""), in_doubt=in_doubt)
        reason = form_reason(form)
        expected = str(form.get("expected") or "")
        if expected != str(len(ids)):
            raise InputError(f"the jobs matched changed since the preview ({expected} then, "
                             f"{len(ids)} now): preview again")

        def run() -> dict[str, list[int]]:
            with console.db() as conn:
                return console_actions.bulk(conn, actor(user), action, ids, reason,
                                            scope=scope, portal_checked=(
                                                form.get("uncertain_ok") == "yes"))

        result = await run_in_threadpool(run)
        return console.render(request, "bulk.html", action=action, result=result,
                              count=len(ids), ids=ids, query=filter_query(form))

    def artifact(request: Request) -> Response:
        require(request)
        with console.db() as conn:
            row = console_repo.artifact(conn, int(request.path_params["artifact_id"]))
        if row is None:
            raise HTTPException(404, "no such artifact")
        root = console.service.artifacts().resolve()
        path = Path(row["path"]).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise HTTPException(404, "the artifact file is gone (pruned or moved)")
        if row["kind"] == "screenshot":
            return FileResponse(path, media_type=mimetypes.guess_type(path.name)[0]
                                or "image/png")
        return FileResponse(path, filename=f"job{row['job_id']}-attempt{row['attempt']}-"
                            f"{path.name}", media_type="application/octet-stream")

    def document(request: Request) -> Response:
        # a document is the portal's own output (it may name the responsible party's tax
        # id): operators and admins only, never scanned or rewritten
        require(request, "operator")
        with console.db() as conn:
            row = console_repo.document(conn, int(request.path_params["job_id"]),
                                        request.path_params["name"])
        if row is None:
            raise HTTPException(404, "no such document")
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in row["name"])
        # always a download (never rendered in the console's origin); a PDF says so, so
        # the browser and the file manager open it as one
        media = row["content_type"] if row["content_type"] in DOCUMENT_TYPES else \
            "application/octet-stream"
        return Response(row["data"], media_type=media, headers={
            "Content-Disposition": f'attachment; filename="{safe}"'})

    return [Route("/jobs", jobs_list), Route("/jobs.json", jobs_json),
            Route("/jobs/bulk", bulk, methods=["POST"]),
            Route("/jobs/{job_id:int}.json", job_json),
            Route("/jobs/{job_id}", job), Route("/jobs/{job_id}/edit", edit),
            Route("/jobs/{job_id:int}/{action}", act, methods=["POST"]),
            Route("/artifacts/{artifact_id:int}", artifact),
            Route("/jobs/{job_id:int}/documents/{name}", document)]

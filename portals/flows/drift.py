"""Evidence of a changed portal: when a flow meets a page it does not know
(:class:`jobs.errors.PortalChanged`), the page's accessibility tree (Playwright's aria
snapshot) is kept beside what the flow expected, so a person can see what changed
before resuming the portal. Both are files in the attempt's evidence folder
(``aria-page.yaml``, ``aria-expected.yaml``), next to the masked failure screenshot.

The page's snapshot leaves the data out: the job's own values (every string of its
payload, its secrets in every written form) and anything shaped like an SSN/ITIN are
replaced by ``***``, and a definition list's values (a review page's data) by ``(data)``:
the tree's structure -- roles, labels, headings, buttons -- is what tells a redesign.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from portalq.jobs.errors import PortalChanged
from portalq.jobs.secrets.redaction import scrub_all
from portalq.portals.flows.browser import note_missing
from portalq.portals.flows.context import FlowContext
from portalq.portals.flows.masking import redact

PAGE_FILE = "aria-page.yaml"
EXPECTED_FILE = "aria-expected.yaml"

#: a definition list's value in an aria snapshot: ``- definition: Acme LLC``
_DEFINITION = re.compile(r"^(\s*- definition)(:.*|\s+\".*)$", re.MULTILINE)


def payload_values(payload: Any) -> list[str]:
    """Every string (and number) in a payload, nested: the job's data."""
    out: list[str] = []
    if isinstance(payload, Mapping):
        for v in payload.values():
            out += payload_values(v)
    elif isinstance(payload, list | tuple):
        for v in payload:
            out += payload_values(v)
    elif isinstance(payload, str | int) and not isinstance(payload, bool):
        text = str(payload).strip()
        if len(text) >= 3:   # a shorter value ("CA", "1") would blank out labels
            out.append(text)
    return out


def leave_data_out(snapshot: str, values: Iterable[str], secrets: Iterable[str] = ()) -> str:
    """``snapshot`` with the job's secrets (anywhere) and values (whole words), SSN/ITIN
    shapes and definitions' values left out."""
    text = redact(_DEFINITION.sub(r"\1: (data)", snapshot), secrets)
    for value in sorted(set(values), key=len, reverse=True):
        # whole words only: a value such as "digital" must not blank out "digitally"
        text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", "***", text)
    return str(scrub_all(text, []))


async def keep_evidence(page: Any, ctx: FlowContext[BaseModel], exc: PortalChanged) -> None:
    """Write the page's aria snapshot (data left out) and the expected one. Best effort:
    what cannot be taken is recorded as missing (evidence never decides an outcome)."""
    folder = ctx.artifacts_dir
    secrets = ctx.secrets()
    values = payload_values(dict(ctx.payload))
    try:
        snapshot = await page.locator("body").aria_snapshot(timeout=5000)
        (folder / PAGE_FILE).write_text(
            f"# {ctx.portal}: the page met at {exc.where or 'an unknown step'} "
            f"({page.url.split('?')[0]}), data left out\n"
            + leave_data_out(snapshot, values, secrets) + "\n", encoding="utf-8")
    except Exception as err:  # noqa: BLE001 - evidence never decides an outcome
        note_missing(folder, "aria snapshot of the page", err)
    try:
        (folder / EXPECTED_FILE).write_text(
            f"# {ctx.portal}: what the flow expected at {exc.where or 'this step'}\n"
            + redact(exc.expected or "(not described)", secrets) + "\n", encoding="utf-8")
    except Exception as err:  # noqa: BLE001
        note_missing(folder, "expected aria snapshot", err)

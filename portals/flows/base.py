"""Helpers every flow uses: a fresh page, evidence, masking, error classification."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from jobs.errors import HandlerOutcome, RetryableError
from portals.flows.context import FlowContext

#: elements masked in every screenshot (stand-ins mark sensitive output with data-sensitive)
SENSITIVE_SELECTOR = (
    "[data-sensitive], input[type=password], input[name*=ssn i], input[name*=itin i]"
)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and its digits-only / dashed forms) replaced by ***."""
    for secret in secrets:
        if not secret:
            continue
        digits = re.sub(r"\D", "", secret)
        forms = {secret}
        if len(digits) == 9:
            forms |= {digits, f"{digits[:3]}-{digits[3:5]}-{digits[5:]}"}
        for form in forms:
            text = text.replace(form, "***")
    return text


class Evidence:
    """Numbered screenshots of one attempt, masked."""

    def __init__(self, ctx: FlowContext) -> None:
        self.ctx = ctx
        self.seq = 0

    async def shot(self, page: Any, name: str) -> None:
        self.seq += 1
        path = self.ctx.artifacts_dir / f"{self.seq:02d}-{name}.png"
        await page.screenshot(path=str(path), full_page=True,
                              mask=[page.locator(SENSITIVE_SELECTOR)])


@asynccontextmanager
async def browser_page(ctx: FlowContext) -> AsyncIterator[tuple[Any, Evidence]]:
    """A page in a fresh browser context; a masked screenshot on failure; Playwright
    timeouts become retryable errors (with secrets redacted from the message)."""
    from playwright.async_api import Error as PlaywrightError

    context = await ctx.new_browser_context()
    evidence = Evidence(ctx)
    page = await context.new_page()
    try:
        yield page, evidence
    except HandlerOutcome:
        await _failure_shot(page, evidence)
        raise
    except PlaywrightError as exc:
        await _failure_shot(page, evidence)
        raise RetryableError(redact(str(exc).splitlines()[0], ctx.secrets())) from None
    finally:
        await context.close()


async def _failure_shot(page: Any, evidence: Evidence) -> None:
    try:
        await evidence.shot(page, "failure")
    except Exception:  # noqa: BLE001 - a page that cannot be photographed must not hide the error
        pass

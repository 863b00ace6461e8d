"""What a held browser costs (issue 51): the memory of Chromium's processes (proportional
set size: shared pages split among the processes sharing them) with 0..N job contexts open
on a stand-in portal's first page, each screencast as the live view does (masked, frames
to a sink that keeps none). A held browser is one such context: the browser process itself
is shared by every job of the node.

    python bench/held_browser_bench.py [--contexts 4]

Prints the memory per step and the median step (docs/takeover.md has the numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from pathlib import Path
from typing import Any

from portalq.portals.flows.browser import launch, load_config
from portalq.portals.flows.live import Frame, Screencast
from portalq.portals.standin.server import StandinServer


def _children(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            kids = (task / "children").read_text().split() if (task / "children").exists() else []
            todo += [int(k) for k in kids]
    return found


def pss_mb(root: int) -> float:
    total = 0
    for pid in _children(root):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def browser_pid(playwright_driver_pid: int) -> int:
    """Chromium's browser process: the child of Playwright's driver."""
    for pid in _children(playwright_driver_pid)[1:]:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        if b"chrom" in cmd:
            return pid
    raise RuntimeError("no Chromium found")


async def main(contexts: int) -> None:
    from playwright.async_api import async_playwright

    with StandinServer() as standin:
        async with async_playwright() as pw:
            browser = await launch(pw, load_config())
            import os
            root = browser_pid(os.getpid())
            page_url = standin.url("irs_ein")
            await asyncio.sleep(1)
            sizes = [pss_mb(root)]
            print(f"browser alone: {sizes[0]:.0f} MB")

            async def sink(_frame: Frame) -> None:
                return None

            held: list[Any] = []
            for n in range(1, contexts + 1):
                context = await browser.new_context(viewport={"width": 1280, "height": 800})
                cast = Screencast(context, ["123-45-6789"], sink)
                await cast.start()
                page = await context.new_page()
                await page.goto(page_url)
                await page.wait_for_load_state("networkidle")
                held.append((context, cast))
                await asyncio.sleep(1.5)   # let the renderer settle before reading memory
                sizes.append(pss_mb(root))
                print(f"{n} context(s) held: {sizes[-1]:.0f} MB "
                      f"(+{sizes[-1] - sizes[-2]:.0f} MB)")
            steps = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
            print(f"a held browser (context + page + screencast): median "
                  f"{statistics.median(steps):.0f} MB, max {max(steps):.0f} MB")
            for context, cast in held:
                await cast.stop()
                await context.close()
            await browser.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=int, default=4)
    asyncio.run(main(parser.parse_args().contexts))

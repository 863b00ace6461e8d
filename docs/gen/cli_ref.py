"""Write docs/reference/cli.md from the `portalq` command itself.

The page is generated, never written by hand: every command of the Typer app (its click
tree: groups, commands, their help, arguments and options) in the order `--help` lists
them. `python docs/gen/cli_ref.py` rewrites the page; `--check` exits 1 when the committed
page (or `--page PATH`) differs from what the commands say (tests/unit/test_docs_reference.py).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import typer

from portalq.scheduler import cli

PAGE = Path(__file__).resolve().parents[1] / "reference" / "cli.md"

HEADER = """# Command line

Generated from the `portalq` command by `docs/gen/cli_ref.py`; do not edit by hand
(`python docs/gen/cli_ref.py` rewrites it, and a test fails when it is out of date).
Every option can also come from its `PORTALQ_*` setting (see [Settings](settings.md));
exit codes are listed in [Exit codes](exit-codes.md).
"""


def _help(cmd: Any) -> str:
    return inspect.cleandoc(cmd.help or "").strip()


def _param_row(param: Any) -> str:
    help_ = " ".join((param.help or "").split())
    if param.param_type_name == "argument":
        name = f"`{param.name.upper()}`"
        kind = "argument" if param.required else "argument, optional"
    else:
        name = " / ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        kind = "flag" if param.is_flag else "value"
        if param.required:
            kind += ", required"
        default = param.default
        if (not param.is_flag and default not in (None, "", ()) and not callable(default)
                and "default" not in help_):
            help_ += f" (default: `{default}`)"
    if param.multiple:
        kind += ", repeatable"
    cell = help_.strip().replace("|", "\\|")
    return f"| {name} | {kind} | {cell} |"


def _command(cmd: Any, path: list[str], out: list[str]) -> None:
    depth = min(len(path) + 1, 4)
    out.append(f"{'#' * depth} `{' '.join(path)}`\n")
    if _help(cmd):
        out.append(_help(cmd) + "\n")
    ctx = typer.Context(cmd, info_name=" ".join(path))
    params = [p for p in cmd.get_params(ctx) if p.name != "help" and not p.hidden]
    subs = getattr(cmd, "commands", None)
    if not subs:
        args = [p.name.upper() if p.required else f"[{p.name.upper()}]"
                for p in params if p.param_type_name == "argument"]
        usage = " ".join([*path, "[OPTIONS]", *args])
        out.append(f"```\n{usage}\n```\n")
    if params:
        out.append("| option | kind | meaning |\n|---|---|---|")
        out.extend(_param_row(p) for p in params)
        out.append("")
    for name, sub in sorted((subs or {}).items()):
        if not sub.hidden:
            _command(sub, [*path, name], out)


def render() -> str:
    # the command groups that live in modules of their own are added by cli._register (what
    # main() does first); should they come to be added at import, there is nothing to call
    register = getattr(cli, "_register", None)
    if register is not None:
        register()
    root = typer.main.get_command(cli.app)
    out = [HEADER]
    _command(root, ["portalq"], out)
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    page = Path(argv[argv.index("--page") + 1]) if "--page" in argv else PAGE
    text = render()
    if "--check" in argv:
        if not page.exists() or page.read_text() != text:
            print(f"{page} is out of date: run python docs/gen/cli_ref.py", file=sys.stderr)
            return 1
        return 0
    page.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

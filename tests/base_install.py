"""Run portalq as a base install (``pip install portalq``, no ``[console]`` extra) would:
a Python whose console packages cannot be imported (issue 40)."""

from __future__ import annotations

import sys

from portalq.scheduler.cli.console import CONSOLE_MODULES

#: in sys.modules as None, a package is one ``import`` refuses and find_spec does not find
LAUNCH = ("import sys\n"
          f"for name in {CONSOLE_MODULES!r}:\n"
          "    sys.modules[name] = None\n"
          "from portalq.scheduler.cli import main\n"
          "main(sys.argv[1:])\n")


def base_install(argv: list[str]) -> list[str]:
    """``[python, -m, portalq, *args]`` -> the same command without the console packages."""
    assert argv[1:3] == ["-m", "portalq"], argv
    return [sys.executable, "-c", LAUNCH, *argv[3:]]

"""Run a command in a copy of the package laid out as it installs:
``python tools/package_view.py COMMAND [ARGS...]``.

The repository keeps ``jobs/``, ``scheduler/``, ``portals/`` and ``migrations/`` at the top and
setup.py maps them into ``portalq`` (one path per file, no links). grimp, the import graph
behind ``lint-imports`` and tests/unit/test_import_graph.py, names a module by walking the
folder of its top-level package, so it would see ``portalq/`` alone. This copies ``portalq/``
and the four folders into a temporary ``portalq/`` (a copy, not links: the repository is read,
never pointed into) and runs the command there, with the copy first on the path. The command
reports module names, which are the same in the copy; the copy is removed afterwards.

``PORTALQ_REPO`` tells the command where the repository is (for its configuration).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("jobs", "scheduler", "portals", "migrations")   # as setup.py's package_dir


def build(dest: Path) -> Path:
    """The installed layout under ``dest``: ``dest/portalq/jobs/...``."""
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "portalq", dest / "portalq", ignore=skip)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, dest / "portalq" / folder, ignore=skip)
    return dest


def main(command: list[str]) -> int:
    if not command:
        print("portalq: error: usage: python tools/package_view.py COMMAND [ARGS...]",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="portalq-view-") as tmp:
        view = build(Path(tmp))
        env = {**os.environ, "PORTALQ_REPO": str(ROOT),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(view),
                                                           os.environ.get("PYTHONPATH")]))}
        return subprocess.run(command, cwd=view, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""mypy on the package with each module at its one path: ``python tools/typecheck.py [mypy args]``.

The repository keeps ``jobs/``, ``scheduler/``, ``portals/`` and ``migrations/`` at the top and
setup.py maps them into ``portalq`` (no links). mypy finds a module by walking folders named
as the module, so on its own it sees ``portalq/`` and not ``portalq.jobs``; this driver hands
it every file of the four folders under its installed name (``jobs/queue.py`` is
``portalq.jobs.queue``), so its messages name the files a maintainer opens. Everything else
(the strictness, the overrides) is mypy's own configuration in pyproject.toml.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("jobs", "scheduler", "portals", "migrations")   # as setup.py's package_dir


def folder_sources() -> list[BuildSource]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append(BuildSource(str(path.relative_to(ROOT)), "portalq." + ".".join(parts)))
    return found


def main(args: list[str]) -> int:
    # mypy's own entry point builds the sources it found itself (and is compiled, so it cannot
    # be handed others): read the configuration as it does, then build with the folders added
    fscache = FileSystemCache()
    sources, options = process_options(args, fscache=fscache)
    try:
        result = build.build(sources + folder_sources(), options, fscache=fscache)
        messages = result.errors
    except CompileError as exc:   # a blocking error (a syntax error, a bad config)
        messages = exc.messages
    for line in messages:
        print(line)
    errors = sum(" error: " in line for line in messages)
    files = len(sources) + len(folder_sources())
    print(f"Found {errors} errors (checked {files} source files)" if errors
          else f"Success: no issues found in {files} source files")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

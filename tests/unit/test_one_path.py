"""One path per file (issue 50): setup.py maps the top-level folders into ``portalq``, so no
file of the package is a link, and a module has one name. From a checkout's root the folders
are also reachable as bare ``jobs``, ``scheduler``...: importing one would load a second copy
of every module under it (a second clock, a second registry of job types), so the bare names
refuse to load rather than alias (an application's own ``jobs`` package must stay its own)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from tests.conftest import ROOT

FOLDERS = ("jobs", "scheduler", "portals", "migrations")


def test_no_file_of_the_repository_is_a_link():
    staged = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert len(staged) > 300
    assert [line for line in staged if line.startswith("120000")] == []
    links = [os.path.join(d, n) for top in ("portalq", *FOLDERS)
             for d, dirs, files in os.walk(ROOT / top) for n in dirs + files
             if os.path.islink(os.path.join(d, n))]
    assert links == []


def _folders(path) -> tuple[str, ...]:
    tree = ast.parse(path.read_text())
    [folders] = [ast.literal_eval(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["FOLDERS"]]
    return folders


def test_the_build_maps_the_folders_the_tools_know():
    # setup.py maps them; mypy's driver and the view for grimp must name the same
    for path in (ROOT / "setup.py", ROOT / "tools" / "typecheck.py",
                 ROOT / "tools" / "package_view.py"):
        assert _folders(path) == FOLDERS, path


def test_from_the_checkout_root_a_module_has_one_name():
    # a fresh interpreter in the repository's root (its folder first on the path, as for
    # `python -c` or pytest): every module of the package loaded, then each bare name tried
    code = f"""
import importlib, pkgutil, sys
folders = {FOLDERS!r}
skip = ('portalq.portals.standin.__main__', 'portalq.scheduler.__main__')
for folder in folders:
    pkg = importlib.import_module('portalq.' + folder)
    assert pkg.__file__.startswith({str(ROOT)!r} + '/' + folder + '/'), pkg.__file__
    if folder != 'migrations':   # its versions run only under alembic
        for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):
            if m.name not in skip:
                importlib.import_module(m.name)
for bare in (*folders, 'jobs.clock', 'portals.calendar', 'scheduler.cli'):
    try:
        importlib.import_module(bare)
    except ImportError as exc:
        assert 'portalq.' in str(exc), exc
    else:
        raise AssertionError('loaded under a bare name: ' + bare)
files = {{}}
for name, module in list(sys.modules.items()):
    path = getattr(module, '__file__', None)
    if path and path.startswith({str(ROOT)!r}):
        files.setdefault(path, []).append(name)
twice = {{p: n for p, n in files.items() if len(n) > 1}}
print(len(files), twice)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    count, twice = out.stdout.split(" ", 1)
    assert int(count) > 150 and twice.strip() == "{}", out.stdout

"""One namespace: the facade's names resolve, and no module of portalq is loaded under a bare
folder name (``jobs.queue`` beside ``portalq.jobs.queue`` would be two copies of one
module, each with its own state)."""

from __future__ import annotations

import subprocess
import sys

import portalq


def test_the_facade_lists_what_it_exports():
    assert sorted(portalq.__all__) == sorted(portalq._EXPORTS)
    for name in portalq.__all__:
        assert getattr(portalq, name) is not None, name


def test_the_facade_refuses_an_unknown_name():
    try:
        portalq.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_every_module_loads_under_portalq_only():
    # a fresh interpreter: walk every module of the namespace, then look for bare names
    code = (
        "import importlib, pkgutil, sys, portalq\n"
        "skip = ('portalq.portals.standin.__main__', 'portalq.scheduler.__main__')\n"
        "for folder in ('jobs', 'scheduler', 'portals'):\n"   # mapped in by setup.py
        "    pkg = importlib.import_module('portalq.' + folder)\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if m.name not in skip:\n"
        "            __import__(m.name)\n"
        "bare = sorted(n for n in sys.modules if n.split('.')[0] in "
        "('jobs', 'scheduler', 'portals', 'migrations'))\n"
        "print(len(sys.modules), bare)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd="/", timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    count, bare = out.stdout.split(" ", 1)
    assert int(count) > 100 and bare.strip() == "[]", out.stdout


def test_importing_the_queue_does_not_load_the_cli_or_playwright():
    code = ("import sys, portalq.jobs.queue\n"
            "print(sorted(n for n in sys.modules if n.startswith(('playwright', "
            "'portalq.scheduler', 'portalq.portals', 'typer'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd="/", timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"

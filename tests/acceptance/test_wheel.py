"""Installed, portalq is one package, ``portalq``: its wheel beside a business app that has
packages of its own named ``jobs`` and ``migrations`` (common names), and the README's
transactional sample run from that app, in a fresh virtualenv."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import psycopg

from tests.acceptance.test_readme import _sample
from tests.conftest import ROOT


def _build_wheel(out: Path) -> Path:
    # from a copy of the tracked files: setuptools reuses the tree's build/ folder, where a
    # module moved or removed since an earlier build would still be, and enter the wheel
    src = out.parent / "src"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                             capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, tracked):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    # the build backend from this environment (no download): the test checks the wheel's
    # contents, not the network
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(src)],
                   check=True, capture_output=True, text=True, timeout=300)
    [wheel] = out.glob("portalq-*.whl")
    return wheel


def test_the_wheel_installs_one_package_beside_the_apps_own(tmp_path, db, dsn):
    wheel = _build_wheel(tmp_path / "dist")
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"portalq", "portalq-0.1.0.dist-info"}, tops
    names = zipfile.ZipFile(wheel).namelist()
    # the folders' files are in the wheel as files of the namespace (not as symlinks)
    # each module once, at its own path (setup.py maps the folders: no links, no copies)
    assert len(names) == len(set(names))
    assert not [n for n in names if n.startswith("portalq/scheduler/cli_")], names
    for member in ("portalq/jobs/queue.py", "portalq/jobs/db/sql/queries.sql",
                   "portalq/migrations/env.py", "portalq/scheduler/cli/__init__.py",
                   "portalq/portals/irs/flow.py", "portalq/scheduler/console/app.py"):
        assert member in names, member
    entry = zipfile.ZipFile(wheel).read("portalq-0.1.0.dist-info/entry_points.txt").decode()
    assert "portalq = portalq.scheduler.cli:main" in entry
    assert "builtin = portalq.portals.catalogue" in entry

    # a fresh virtualenv: the wheel alone; its dependencies reached through a plain path
    # entry to this environment's site-packages (a path entry runs no .pth file, so the
    # editable install of the working tree is not seen)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    purelib, str(wheel)], check=True, capture_output=True, timeout=300)
    Path(purelib, "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # (--target puts the console script in its bin/, which a real install puts in the venv's)
    assert sorted(p.name for p in Path(purelib).iterdir()
                  if not p.name.endswith(".pth") and p.name != "bin") == [
        "portalq", "portalq-0.1.0.dist-info"]

    app = tmp_path / "app"
    for pkg in ("jobs", "migrations"):
        (app / pkg).mkdir(parents=True)
        (app / pkg / "__init__.py").write_text(f"OWNER = 'the app'\nNAME = {pkg!r}\n")
    (app / "main.py").write_text(textwrap.dedent("""
        import os
        import jobs, migrations
        database_url = os.environ["database_url"]
        assert jobs.OWNER == migrations.OWNER == "the app", (jobs.__file__, migrations.__file__)
        import portalq
        assert portalq.__file__.startswith({purelib!r}), portalq.__file__
        """).format(purelib=purelib) + _sample("README.md") + textwrap.dedent("""
        import sys
        assert sys.modules["jobs"].__file__.startswith({app!r})
        print("ok", portalq.__file__)
        """).format(app=str(app)))
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE orders (id text PRIMARY KEY)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    proc = subprocess.run([str(py), "main.py"], cwd=app, env={**env, "database_url": db},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok " + purelib), proc.stdout
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT job_type, order_id FROM portalq.job_queue").fetchall() == [
            ("name_search", "ORD-1001")]

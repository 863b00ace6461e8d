"""run_cli's fork server (tests/cli_zygote.py) gives what a subprocess would: its own
process, environment, directory, stdin, stdout, stderr and exit status, a timeout that
kills it, and nothing of portalq imported before the command runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests import cli_zygote
from tests.conftest import ROOT, run_cli


@pytest.fixture(scope="module")
def forks():
    return cli_zygote.Client(str(ROOT))


def probe(forks, *argv, env=None, cwd=ROOT, timeout=30, input=None):
    full = {**os.environ, **(env or {})}
    assert forks.serves(full)
    return forks.run(list(argv), full, str(cwd), timeout, input, module="tests.zygote_probe")


def test_a_child_is_a_process_of_its_own_with_what_it_was_given(forks, tmp_path):
    out = probe(forks, "show", "x y", env={"PROBE": "seen", "PROBE_EXIT": "3"}, cwd=tmp_path,
                input="typed\nlines\n")
    assert out.returncode == 3
    got = json.loads(out.stdout)
    assert got["pid"] != os.getpid() and got["cwd"] == str(tmp_path)
    assert (got["env"], got["stdin"], got["argv"]) == ("seen", "typed\nlines\n", ["show", "x y"])
    assert not got["loaded"]   # portalq's modules are imported in the child, as in a fresh one
    assert out.stderr == "to stderr\nwith a CRLF\n"   # as text=True reads it
    again = json.loads(probe(forks, "show").stdout)
    assert again["pid"] != got["pid"] and again["env"] is None and again["stdin"] == ""


def test_a_timeout_kills_the_child(forks):
    with pytest.raises(subprocess.TimeoutExpired):
        probe(forks, "hang", timeout=1)


def test_python_startup_variables_are_not_served(forks):
    assert not forks.serves({**os.environ, "PYTHONPATH": "/elsewhere"})


def test_the_cli_answers_as_from_a_subprocess():
    for args in (("--help",), ("jobs", "no-such-command"), ("enqueue", "no_such_type",
                                                           "--order", "X")):
        forked = run_cli(*args)
        plain = subprocess.run([sys.executable, "-m", "portalq", *args], capture_output=True,
                               text=True, cwd=ROOT, timeout=60)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            plain.returncode, plain.stdout, plain.stderr), args

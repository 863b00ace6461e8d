"""An idle worker loads only what it uses (issue 49.2): what the service's worker imports
to start leaves out the mailer (jinja2, smtplib: a flow that mails loads it) and AES-GCM
(cryptography: the first sealed job or key loads it). Measured once each with
``python -X importtime`` and the resident size: ~2.6 MiB and ~7 MiB of a worker's ~64."""

from __future__ import annotations

import subprocess
import sys

LAZY = ("cryptography", "jinja2", "smtplib", "portalq.scheduler.mailer")


def test_the_workers_imports_leave_out_the_mailer_and_aes_gcm(tmp_path):
    probe = ("import sys\n"
             "from portalq.scheduler import logs, service\n"
             "from portalq.scheduler.handlers import register_handler\n"
             "from portalq.scheduler.worker import Worker\n"
             f"print(sorted(m for m in {LAZY!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={"PORTALQ_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

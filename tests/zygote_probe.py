"""What tests/unit/test_cli_zygote.py runs in the fork server: says what its process sees."""

from __future__ import annotations

import json
import os
import signal
import sys

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "hang":
        signal.pause()   # until a signal: the timeout's SIGKILL
    print(json.dumps({"pid": os.getpid(), "cwd": os.getcwd(), "env": os.environ.get("PROBE"),
                      "stdin": sys.stdin.read(), "argv": sys.argv[1:],
                      "loaded": "portalq.jobs" in sys.modules}))
    print("to stderr\r\nwith a CRLF", file=sys.stderr)
    sys.exit(int(os.environ.get("PROBE_EXIT", "0")))

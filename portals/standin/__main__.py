import argparse

from portalq.portals.standin.server import serve

parser = argparse.ArgumentParser(prog="python -m portals.standin")
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=8765)
args = parser.parse_args()
serve(args.host, args.port)

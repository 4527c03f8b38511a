"""`kraftlab serve [--store DIR] [--port P]`: browse runs and reports on localhost."""

from __future__ import annotations

import argparse
from pathlib import Path

from kraftlab.serve import make_server
from kraftlab.store import DEFAULT_STORE

HELP = "serve the store as browsable pages on localhost"
"""The one line `kraftlab --help` shows (read without importing this module)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help=HELP)
    p.add_argument("--store", type=Path, default=DEFAULT_STORE)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.store.mkdir(parents=True, exist_ok=True)
    server = make_server(args.store, args.host, args.port)
    print(f"serving {args.store.resolve()} on http://{args.host}:{server.server_address[1]}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0

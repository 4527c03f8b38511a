"""Mounting and unmounting the filesystem, and its command line (`python -m kraftlab.nemesis.diskfs`):

    mount BACKING MOUNTPOINT --control SOCKET [--seed N]   serve in the foreground until SIGTERM
    ctl SOCKET '{"cmd": "crash"}'                           one control request; prints the answer
    unmount MOUNTPOINT                                      lazy unmount (also of a dead filesystem)

The mount serves until SIGTERM/SIGINT or an `unmount` request, then unmounts. A filesystem whose
process was SIGKILLed leaves a dead mount ("Transport endpoint is not connected"): `unmount` (a
lazy `fusermount3 -u -z`) removes it, which is what clean-up does after a killed run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from kraftlab.control.mounts import FSNAME, unmount
from kraftlab.exits import EXIT_BAD_ARGS


def serve(backing: str, mountpoint: str, control_path: str, seed: int = 0) -> None:
    import pyfuse3
    import trio

    from kraftlab.nemesis.diskfs.control import serve as serve_control
    from kraftlab.nemesis.diskfs.fs import DiskFs

    fs = DiskFs(backing, seed)
    if os.path.lexists(control_path):
        os.unlink(control_path)
    options = set(pyfuse3.default_options) | {f"fsname={FSNAME}", "subtype=kraftlab"}
    pyfuse3.init(fs, mountpoint, options)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            async def watch_signals() -> None:
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        pyfuse3.terminate()
                        return

            nursery.start_soon(watch_signals)
            nursery.start_soon(serve_control, fs, control_path, pyfuse3.terminate)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    finally:
        pyfuse3.close(unmount=True)
        if os.path.lexists(control_path):
            os.unlink(control_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kraftlab.nemesis.diskfs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("mount", help="serve BACKING at MOUNTPOINT in the foreground")
    m.add_argument("backing")
    m.add_argument("mountpoint")
    m.add_argument("--control", required=True, help="the control socket's path")
    m.add_argument("--seed", type=int, default=0, help="seed of the error rules' random draws")
    c = sub.add_parser("ctl", help="send one control request")
    c.add_argument("socket")
    c.add_argument("request", help='a JSON object, e.g. {"cmd": "status"}')
    u = sub.add_parser("unmount", help="unmount (lazily) the diskfs at MOUNTPOINT")
    u.add_argument("mountpoint")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_BAD_ARGS if exc.code else 0
    if args.command == "mount":
        for d in (args.backing, args.mountpoint):
            if not os.path.isdir(d):
                print(f"diskfs: {d} is not a directory", file=sys.stderr)
                return EXIT_BAD_ARGS
        serve(args.backing, args.mountpoint, args.control, args.seed)
        return 0
    if args.command == "ctl":
        from kraftlab.nemesis.diskfs.control import ControlError, request

        try:
            req = json.loads(args.request)
        except json.JSONDecodeError as exc:
            print(f"diskfs: the request is not JSON: {exc}", file=sys.stderr)
            return EXIT_BAD_ARGS
        try:
            print(json.dumps(request(args.socket, req)))
        except ControlError as exc:
            print(f"diskfs: {exc}", file=sys.stderr)
            return 1
        return 0
    print(json.dumps({"unmounted": unmount(args.mountpoint)}))
    return 0

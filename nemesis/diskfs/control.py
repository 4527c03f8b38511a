"""The control channel of a mounted filesystem: a Unix socket taking one JSON request per line and
answering one JSON line.

Requests (`{"cmd": ...}`):
- `crash`: drop everything not durable (send it right after the kill of the process using the
  mount, before that process starts again); the answer says what was dropped.
- `fail`: add an error rule (`ops`, `glob`, `errno` EIO|ENOSPC, `probability`); `delay`: add an
  fsync delay (`glob`, `ms`); `clear`: remove every rule (`"rules": "delay"` or `"fail"`: those only).
- `status`: what is not durable yet, the rules, the errors injected so far.
- `injected`: the errors injected since the last such request (`op`, `path`, `errno`, and `rmono`,
  the host's unskewed monotonic clock in ns, which node journals carry too).
- `unmount`: stop serving and unmount.
Every answer has `ok`; a refused request says why in `error`.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from typing import Any, Protocol

from kraftlab.nemesis.diskfs.faults import Rule, RuleError

MAX_REQUEST = 64 * 1024


class Controlled(Protocol):
    """What the control channel acts on (the mounted `DiskFs`, or a fake in tests)."""

    def crash(self) -> Any: ...

    def status(self) -> dict[str, Any]: ...

    def fail(self, rule: Rule) -> None: ...

    @property
    def faults(self) -> Any: ...


def handle(fs: Controlled, request: dict[str, Any], stop: Callable[[], None]) -> dict[str, Any]:
    """One request → its answer (never raises for a bad request: the answer says why)."""
    cmd = request.get("cmd")
    try:
        if cmd == "crash":
            return {"ok": True, **fs.crash().to_json()}
        if cmd == "fail":
            rule = Rule.parse({k: v for k, v in request.items() if k != "cmd"})
            fs.fail(rule)
            return {"ok": True, "rule": rule.to_json()}
        if cmd == "delay":
            rule = Rule.parse({"ops": ["fsync"], "glob": request.get("glob", "*"),
                               "delay_ms": request.get("ms", 0)})
            fs.faults.add(rule)
            return {"ok": True, "rule": rule.to_json()}
        if cmd == "clear":
            return {"ok": True, "cleared": fs.faults.clear(request.get("rules"))}
        if cmd == "injected":
            return {"ok": True, "errors": fs.faults.take_errors()}
        if cmd == "status":
            return {"ok": True, **fs.status()}
        if cmd == "unmount":
            stop()
            return {"ok": True}
    except (RuleError, ValueError, TypeError) as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": False, "error": f"unknown cmd {cmd!r}; known: crash, fail, delay, clear, injected, status, unmount"}


async def serve(fs: Controlled, path: str, stop: Callable[[], None]) -> None:
    """Serve the control socket at `path` until cancelled (requests are handled one at a time, in
    the filesystem's own loop, so a crash never interleaves with an operation)."""
    import trio  # only where a filesystem is mounted: a client needs nothing but a socket

    # Bound and listening under a private name, then renamed into place: whoever waits for the
    # socket file (a test's mount helper, a lab's `test -S`) can connect the moment it appears.
    staging = os.path.join(os.path.dirname(path) or ".", f".{os.getpid()}.binding")
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(staging)
    sock.listen(8)
    os.replace(staging, path)
    async with trio.open_nursery() as nursery:
        while True:
            conn, _ = await sock.accept()
            nursery.start_soon(_client, fs, conn, stop)


async def _client(fs: Controlled, conn: Any, stop: Callable[[], None]) -> None:
    with conn:
        buf = b""
        while b"\n" not in buf and len(buf) < MAX_REQUEST:
            chunk = await conn.recv(4096)
            if not chunk:
                break
            buf += chunk
        try:
            request = json.loads(buf.split(b"\n", 1)[0] or b"{}")
            answer = handle(fs, request, stop) if isinstance(request, dict) else {
                "ok": False, "error": "a request is a JSON object"}
        except json.JSONDecodeError as exc:
            answer = {"ok": False, "error": f"not JSON: {exc}"}
        except Exception as exc:  # e.g. the backing directory failed under a crash: say so, keep serving
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        out = json.dumps(answer).encode() + b"\n"
        try:
            while out:
                out = out[await conn.send(out):]
        except OSError:
            pass  # the client went away: the request was still carried out


class ControlError(Exception):
    """The control socket could not be reached or refused the request."""


def request(path: str, req: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one request to the filesystem whose control socket is `path`; its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(path)
            s.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        except OSError as exc:
            raise ControlError(f"diskfs control socket {path}: {exc}") from None
    try:
        answer = json.loads(buf)
    except json.JSONDecodeError:
        raise ControlError(f"diskfs control socket {path}: no answer") from None
    if not answer.get("ok"):
        raise ControlError(f"diskfs refused {req.get('cmd')!r}: {answer.get('error')}")
    return dict(answer)

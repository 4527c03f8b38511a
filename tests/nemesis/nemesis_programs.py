"""Programs run inside namespace hosts by the nemesis namespace tests (written to files, since
namespaces share the filesystem): a TCP echo-name server, a UDP sink, and probes."""

from __future__ import annotations

from pathlib import Path

TCP_SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000)); s.listen(64)
while True:
    c, _ = s.accept()
    try:
        n = int(c.recv(16).decode() or "0")
        c.sendall(sys.argv[1].encode().ljust(8) + b"x" * n)
    except OSError:
        pass
    c.close()
"""

UDP_SINK = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 7001))
out = open(sys.argv[1], "a", buffering=1)
while True:
    data, _ = s.recvfrom(2048)
    out.write(data.decode() + "\\n")
"""

# argv: seconds-timeout bytes addr… → JSON list: the peer's name (or null) and the transfer time
TCP_PROBE = """
import concurrent.futures as cf, json, socket, sys, time
timeout, size, addrs = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
def probe(a):
    t0 = time.monotonic()
    try:
        c = socket.create_connection((a, 7000), timeout=timeout)
        c.sendall(str(size).encode()); got = b""
        while len(got) < size + 8:
            chunk = c.recv(65536)
            if not chunk: break
            got += chunk
        c.close()
        return [got[:8].decode().strip(), time.monotonic() - t0]
    except OSError:
        return [None, time.monotonic() - t0]
with cf.ThreadPoolExecutor(max(1, len(addrs))) as pool:
    print(json.dumps(list(pool.map(probe, addrs))))
"""

# argv: my-name count addr… : send `count` datagrams to each address
UDP_SEND = """
import socket, sys, time
me, count, addrs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(count):
    for a in addrs:
        s.sendto(f"{me} {i}".encode(), (a, 7001))
    if i % 50 == 49: time.sleep(0.002)
"""


def write_programs(directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in (("tcp_server", TCP_SERVER), ("udp_sink", UDP_SINK), ("tcp_probe", TCP_PROBE),
                       ("udp_send", UDP_SEND)):
        path = directory / f"{name}.py"
        path.write_text(text)
        paths[name] = str(path)
    return paths

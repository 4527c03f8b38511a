"""`kraftlab serve`: the store as browsable pages on localhost.

`/` is an index of runs, newest first, with their verdicts; every other path is a file of the
store (each run's report.html, history, node logs and journals), served read-only and never
outside the store directory.
"""

from __future__ import annotations

import functools
import html
import http.server
from pathlib import Path
from typing import Any

from kraftlab.store import list_runs

_VERDICT_WORDS: dict[object, str] = {True: "valid", False: "INVALID"}  # else unknown, or no verdict yet


def index_page(store: Path) -> str:
    rows = []
    for run in list_runs(store):
        res = run.read_results()
        valid = None if res is None else res.get("valid")
        verdict = _VERDICT_WORDS.get(valid, "unknown" if res else "no verdict")
        color = {"valid": "#2b8a3e", "INVALID": "#c92a2a"}.get(verdict, "#e67700")
        rel = run.path.relative_to(store).as_posix()
        test = run.read_test()
        report = f'<a href="/{html.escape(rel)}/report.html">report</a>' if run.report.is_file() else "–"
        rows.append(f"<tr><td>{html.escape(test.get('name', rel.split('/')[0]))}</td>"
                    f"<td><a href='/{html.escape(rel)}/'>{html.escape(run.path.name)}</a></td>"
                    f"<td style='color:{color}'><b>{verdict}</b></td><td>{report}</td>"
                    f"<td>{html.escape(str(test.get('workload', '')))}</td>"
                    f"<td>{html.escape(str(test.get('nemesis', '')))}</td></tr>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>kraftlab runs</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:2em}td,th{border:1px solid #ccc;"
            "padding:3px 8px}table{border-collapse:collapse}</style></head><body><h1>kraftlab runs</h1>"
            "<table><tr><th>test</th><th>run</th><th>verdict</th><th>report</th><th>workload</th>"
            "<th>nemesis</th></tr>" + "".join(rows) + "</table></body></html>")


class StoreHandler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: Any, store: Path, **kwargs: Any) -> None:  # the server's, passed through
        self.store = store
        super().__init__(*args, directory=str(store), **kwargs)

    def do_GET(self) -> None:
        if self.path in ("/", "/index.html"):
            body = index_page(self.store).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return


def make_server(store: Path, host: str = "127.0.0.1", port: int = 8080) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(StoreHandler, store=store.resolve())
    return http.server.ThreadingHTTPServer((host, port), handler)

"""Loopback servers for the acquisition demo: the site on 127.0.0.2:18765 and a "malicious" host on
127.0.0.3:18766 that the demo's threat feed blocks. `/moved` on the site redirects there; the guard
must refuse that hop before connecting, so the blocked host's log stays empty.

    python recipes/acquisition/serve.py &        # then: curate run recipes/acquisition.yaml --out out/acq
"""
from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"
SITE_ADDR, BLOCKED_ADDR = ("127.0.0.2", 18765), ("127.0.0.3", 18766)


def _handler(log: list, routes):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            log.append(self.path)
            status, headers, body = routes(self.path)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    return Handler


def site_routes(path: str):
    if path == "/moved":
        return 302, {"Location": f"http://{BLOCKED_ADDR[0]}:{BLOCKED_ADDR[1]}/payload"}, b""
    page = SITE / path.lstrip("/")
    if path.startswith("/page-") and page.is_file():
        return 200, {"Content-Type": "text/html; charset=utf-8"}, page.read_bytes()
    return 404, {}, b"not found"


def start() -> tuple[list, list, callable]:
    """Start both servers in threads; returns (site log, blocked log, stop)."""
    site_log, blocked_log, servers = [], [], []
    for addr, log, routes in ((SITE_ADDR, site_log, site_routes),
                              (BLOCKED_ADDR, blocked_log, lambda p: (200, {}, b"should never be fetched"))):
        httpd = ThreadingHTTPServer(addr, _handler(log, routes))
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)

    def stop():
        for s in servers:
            s.shutdown()
            s.server_close()
    return site_log, blocked_log, stop


if __name__ == "__main__":
    site_log, blocked_log, stop = start()
    print(f"serving {SITE} on http://{SITE_ADDR[0]}:{SITE_ADDR[1]}/ (blocked host {BLOCKED_ADDR[0]}:{BLOCKED_ADDR[1]}); "
          "Ctrl-C to stop", file=sys.stderr)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        stop()
        print(f"requests that reached the blocked host: {len(blocked_log)}", file=sys.stderr)

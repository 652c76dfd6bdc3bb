"""A logging HTTP server on a 127.0.0.0/8 address, for tests of everything that downloads."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server:
    """A loopback HTTP server that logs every request it receives; routes map path -> handler."""

    def __init__(self, address: str, routes: dict):
        self.log: list[tuple[str, str]] = []   # (path, Host header)
        self.inflight = self.max_inflight = 0
        self.routes = routes
        lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with lock:
                    server.log.append((self.path, self.headers.get("Host")))
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                # in flight while the route answers: once the body is written, the client may send its next
                # request before this thread would get the lock again (seen under load: 3 in flight of 2)
                try:
                    status, headers, body = server.routes[self.path.split("?")[0]](server)
                finally:
                    with lock:
                        server.inflight -= 1
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer((address, 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base = f"http://{address}:{self.port}"
        # shutdown() waits for the loop's next poll: 0.5 s by default, per server, per test
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def paths(self) -> list[str]:
        return [p for p, _ in self.log]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

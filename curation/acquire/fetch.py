"""URL-list downloads behind the network guard: every hop checked, bounded retries, per-host limits.

For each URL, every hop (the URL and each redirect target) is checked by `Guard.check` before any
connection, and the connection goes to the address the guard checked (the Host header and TLS server
name carry the name), so DNS cannot answer differently between check and connect. A refused
destination ends the download at once and is never retried, now or on a later run. Transient failures
(timeouts, connection errors, 429, 5xx) are retried a bounded number of times with exponential
backoff (`Retry-After` honoured up to the cap). Per host, at most `per_host` requests run at once and
request starts are at least `host_interval_s` apart. `fetch_all` keeps a JSONL state file, so a
rerun skips what was fetched or refused and retries only what failed.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

from curation.acquire.netguard import Guard
from curation.core.urls import ascii_host

REDIRECTS = (301, 302, 303, 307, 308)
TOO_LARGE = -1  # pseudo status: the body exceeded max_bytes (not retried)
TRANSIENT = (429, 500, 502, 503, 504)
_URL_SAFE = "/?&=%:@!$'()*+,;-._~"  # already-valid URL characters; anything else is percent-encoded


@dataclass(frozen=True)
class FetchPolicy:
    timeout_s: float = 10.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_redirects: int = 5
    max_bytes: int = 64 * 2**20
    per_host: int = 2
    host_interval_s: float = 0.0
    workers: int = 8
    user_agent: str = "curate/0.1 (+data curation; honours robots.txt)"


@dataclass
class FetchResult:
    url: str
    status: str                      # ok | refused | failed
    reason: str | None = None        # refusal reason (guard) or failure (http_404, timeout, too_large, ...)
    final_url: str | None = None
    http_status: int | None = None
    attempts: int = 0
    hops: list[str] = field(default_factory=list)
    file: str | None = None          # relative to the download folder
    sha256: str | None = None
    bytes: int = 0


class _Transient(Exception):
    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to a checked address, verifying the certificate for the original host name."""

    def __init__(self, address: str, port: int, server_hostname: str, timeout: float):
        super().__init__(address, port, timeout=timeout, context=ssl.create_default_context())
        self._server_hostname = server_hostname

    def connect(self):
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self._server_hostname)


class Fetcher:
    def __init__(self, guard: Guard, policy: FetchPolicy = FetchPolicy(), sleep=time.sleep):
        self.guard = guard
        self.policy = policy
        self.sleep = sleep
        self._host_locks: dict[str, threading.Semaphore] = {}
        self._host_next: dict[str, float] = {}
        self._lock = threading.Lock()

    # -- one URL --------------------------------------------------------------------------------
    def fetch(self, url: str) -> tuple[FetchResult, bytes | None]:
        result = FetchResult(url, "failed")
        current, attempt = url, 0
        while True:
            attempt += 1
            result.attempts = attempt
            try:
                return self._follow(current, result)
            except _Transient as t:
                result.reason = t.reason
                if attempt > self.policy.max_retries:
                    return result, None
                delay = min(self.policy.max_backoff_s, self.policy.backoff_s * 2 ** (attempt - 1))
                if t.retry_after is not None:
                    delay = min(self.policy.max_backoff_s, max(delay, t.retry_after))
                self.sleep(delay)
                current = result.hops[-1] if result.hops else url  # resume at the hop that failed

    def _follow(self, url: str, result: FetchResult) -> tuple[FetchResult, bytes | None]:
        redirects = 0
        while True:
            decision = self.guard.check(url)
            if not decision.allowed:
                result.status, result.reason, result.final_url = "refused", decision.reason, url
                return result, None
            if not result.hops or result.hops[-1] != url:
                result.hops.append(url)
            status, headers, body = self._request(url, decision.addresses[0])
            result.http_status = status
            if status in REDIRECTS and headers.get("location"):
                redirects += 1
                if redirects > self.policy.max_redirects:
                    result.reason = "too_many_redirects"
                    return result, None
                try:
                    url = urljoin(url, headers["location"])
                    urlsplit(url).port  # noqa: B018 - raises on a malformed host or port
                except ValueError:
                    result.reason = "bad_redirect"
                    return result, None
                continue
            if status in TRANSIENT:
                retry_after = headers.get("retry-after")
                raise _Transient(f"http_{status}", float(retry_after) if retry_after and
                                 retry_after.strip().isdigit() else None)
            if status != 200:
                result.reason = "too_large" if status == TOO_LARGE else f"http_{status}"
                return result, None
            result.status, result.reason, result.final_url = "ok", None, url
            result.sha256, result.bytes = hashlib.sha256(body).hexdigest(), len(body)
            return result, body

    def _request(self, url: str, address: str) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        host = ascii_host(parts.hostname)  # the guard checked this form; userinfo was refused there
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""), safe=_URL_SAFE)
        host_header = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
        with self._host_slot(host):
            if parts.scheme == "https":
                conn = _PinnedHTTPS(address, port, host, self.policy.timeout_s)
            else:
                conn = http.client.HTTPConnection(address, port, timeout=self.policy.timeout_s)
            try:
                conn.request("GET", path, headers={"Host": host_header, "User-Agent": self.policy.user_agent,
                                                   "Accept-Encoding": "identity"})
                resp = conn.getresponse()
                headers = {k.lower(): v for k, v in resp.getheaders()}
                body = b""
                if resp.status == 200:
                    body = resp.read(self.policy.max_bytes + 1)
                    if len(body) > self.policy.max_bytes:
                        return TOO_LARGE, headers, b""
                return resp.status, headers, body
            except TimeoutError:
                raise _Transient("timeout") from None
            except (OSError, http.client.HTTPException) as e:
                raise _Transient(f"connection_error:{type(e).__name__}") from None
            finally:
                conn.close()

    @contextmanager
    def _host_slot(self, host: str):
        """At most `per_host` requests to a host at once, starts `host_interval_s` apart."""
        with self._lock:
            sem = self._host_locks.setdefault(host, threading.Semaphore(self.policy.per_host))
        with sem:
            if self.policy.host_interval_s > 0:
                with self._lock:
                    now = time.monotonic()
                    start = max(now, self._host_next.get(host, now))
                    self._host_next[host] = start + self.policy.host_interval_s
                if start > now:
                    time.sleep(start - now)
            yield

    # -- a list of URLs -------------------------------------------------------------------------
    def fetch_all(self, urls: list[str], folder: Path) -> list[FetchResult]:
        """Download `urls` into `folder` (one file per URL, named by the URL's hash); resumable.

        Returns one result per URL in input order. `folder/fetch-state.jsonl` remembers outcomes:
        ok and refused URLs are not requested again, failed ones are retried."""
        folder.mkdir(parents=True, exist_ok=True)
        state_path = folder / "fetch-state.jsonl"
        done: dict[str, FetchResult] = {}
        if state_path.exists():
            for line in state_path.read_text(encoding="utf-8").splitlines():
                r = FetchResult(**json.loads(line))
                if r.status == "refused" or (r.status == "ok" and (folder / r.file).is_file()):
                    done[r.url] = r
        state_lock = threading.Lock()

        def one(url: str) -> FetchResult:
            if url in done:
                return done[url]
            result, body = self.fetch(url)
            if body is not None:
                name = hashlib.sha256(url.encode()).hexdigest()[:32] + ".bin"
                tmp = folder / f".{name}.tmp"
                tmp.write_bytes(body)
                tmp.replace(folder / name)
                result.file = name
            with state_lock, state_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(asdict(result), sort_keys=True) + "\n")
            return result

        unique = list(dict.fromkeys(urls))  # a URL listed twice is fetched once
        with ThreadPoolExecutor(max_workers=self.policy.workers) as pool:
            results = dict(zip(unique, pool.map(one, unique)))
        return [results[u] for u in urls]

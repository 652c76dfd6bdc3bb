"""URL and host normalisation shared by URL dedup, the network guard and the robots.txt opt-out."""
from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def ascii_host(host: str) -> str:
    """The host as DNS sees it: UTS-46 mapped and IDNA-encoded ("ｂａｄ。test" → "bad.test",
    "bücher.de" → "xn--bcher-kva.de"), lower case, no trailing dot; ValueError when it has no such form."""
    host = host.rstrip(".").lower()
    if host.isascii():
        return host
    import idna
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError as e:
        raise ValueError(f"host {host!r} has no IDNA form: {e}") from None


def normalize_url(url: str) -> str | None:
    """Scheme and host lower-cased (host in its IDNA form), default port and fragment dropped, IPv6
    hosts bracketed; None when it is no http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        host = ascii_host(parts.hostname or "")
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, 80 if scheme == "http" else 443) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))

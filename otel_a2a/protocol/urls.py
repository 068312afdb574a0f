"""What of a URL may be recorded: scheme, host, port and path; never credentials, query or
fragment.

Every URL that reaches an attribute or a metric label (agent hints, request URLs, card and
interface URLs) goes through :func:`split_url`. A string it cannot read as an absolute URL with
a host (a port out of range, an unclosed IPv6 bracket, no scheme, no host) is not cut down by
hand, which could leave a password in what looks like a host or a path: it is recorded as the
constant :data:`INVALID_URL`, whatever it held. So is a URL with an ``@`` in its path
(``http://user/x:password@host/``, userinfo written with an unencoded ``/``): every parser
reads it as host ``user``, but what follows is a credential, not an address.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urlsplit

INVALID_URL = "_INVALID"
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class URLParts(NamedTuple):
    """The recordable parts of an absolute URL. ``origin`` is ``scheme://host[:port]``
    (lowercase, default port dropped), ``hostport`` the same without the scheme, ``path``
    the path as written."""

    origin: str
    hostport: str
    path: str


def split_url(url: str) -> URLParts | None:
    """The recordable parts of ``url``, or None when it is not an absolute URL with a host
    that :func:`urllib.parse.urlsplit` reads without error, or has an ``@`` in its path."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname  # after the userinfo, which is never read
        port = parts.port
    except (ValueError, AttributeError):
        return None
    scheme = parts.scheme.lower()
    if not scheme or not host or "@" in parts.path:
        return None
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    hostport = host if port is None or DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    return URLParts(f"{scheme}://{hostport}", hostport, parts.path)


def clean_url(url: object) -> str:
    """``url`` as it may be recorded: origin and path, or :data:`INVALID_URL`."""
    parts = split_url(url) if isinstance(url, str) else None
    return INVALID_URL if parts is None else parts.origin + parts.path

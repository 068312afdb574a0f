"""``otel-a2a check-card URL``: what the invariant will make of an agent's card.

Fetches the well-known card, revalidates it with ``If-None-Match``, and reports the version,
interfaces, etag (and where it came from), caching headers, heartbeat (and its source) and the
spec problems that matter to state tracking. Errors break a MUST of A2A v1.0; warnings break a
SHOULD (spec §8.6 caching) or leave otel-a2a guessing (no heartbeat).
"""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from otel_a2a.protocol import Binding, CardInfo, parse_card
from otel_a2a.protocol.urls import INVALID_URL, clean_url

WELL_KNOWN = "/.well-known/agent-card.json"
_REQUIRED_V1 = (
    "name",
    "description",
    "supportedInterfaces",
    "version",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
)
_BINDINGS = frozenset(binding.value for binding in Binding)
# v0.3 (types.ts@v0.3.0): protocolVersion has a default, so it may be absent
_REQUIRED_V03 = (
    "name",
    "description",
    "url",
    "version",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
)
# a URL httpx cannot even parse is not an HTTPError
_FETCH_ERRORS = (httpx.HTTPError, httpx.InvalidURL)
MAX_CARD_BYTES = 8 * 1024 * 1024  # cards are a few KB; a larger body is refused unread
FETCH_DEADLINE = 30.0  # seconds for a whole fetch, headers included (the client timeout bounds
# each read only); httpcore refuses a header block over 100 KiB (h11 max_incomplete_event_size)
ABANDON_AFTER = 2 * FETCH_DEADLINE + 5.0  # fetch and revalidation, plus closing the loop


class _FetchRefused(Exception):
    """A card body too large, or an answer too slow to arrive."""


async def _get(
    http: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None
) -> tuple[httpx.Response, bytes]:
    """GET with a bound on the body and on the time of the whole exchange: connecting, sending,
    the status line and headers, redirects and the body (the client timeout bounds each read
    only, so a server trickling one byte per read timeout would otherwise hold the check
    forever). Cancelled at the deadline, httpcore closes the connection: nothing is left open."""
    with anyio.move_on_after(FETCH_DEADLINE):
        async with http.stream("GET", url, headers=headers) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_CARD_BYTES:
                    raise _FetchRefused(f"body over {MAX_CARD_BYTES} bytes")
            return response, bytes(body)
    raise _FetchRefused(f"still arriving after {FETCH_DEADLINE:g} s")


@dataclass
class CardReport:
    """``url`` and ``redirected_to`` as printed: without credentials, query or fragment."""

    url: str
    redirected_to: str | None = None
    status: int | None = None
    card: CardInfo | None = None
    cache_control: str | None = None
    revalidation: str = "not tried"
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 2 if self.card is None else (1 if self.errors else 0)


def card_url(url: str) -> str:
    """An agent base URL or a card URL, as the card URL: the well-known path goes at the end of
    the path, before a query string, which is kept (it may be what authorises the fetch). A
    URL ``urlsplit`` cannot read gets the path appended, for the client to refuse."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.rstrip("/") + WELL_KNOWN
    if parts.path.rstrip("/").endswith(".json"):
        return url
    return parts._replace(path=parts.path.rstrip("/") + WELL_KNOWN, fragment="").geturl()


_TOKEN_SEPARATORS = re.compile(r"[:/@?#&=;]+")
_LOCATION_ERROR = "Invalid URL in location header"


def _secrets(url: str) -> list[str]:
    """The pieces of ``url`` that may be credentials, longest first: everything between ``//``
    and its last ``@`` (the userinfo, however the URL is mistyped) and everything after its
    first ``?`` or ``#``, cut at URL separators (an error message quotes a piece: the "port"
    of ``http://user:password/x@host``)."""
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    userinfo = url.split("//", 1)[-1].rpartition("@")[0]
    pieces = {userinfo, url[cut + 1 :]}
    for text in (userinfo, url[cut + 1 :]):
        pieces.update(_TOKEN_SEPARATORS.split(text))
    return sorted((p for p in pieces if p), key=len, reverse=True)


def _scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every piece in ``secrets`` replaced by ``***``: anywhere, or for a piece of
    under 4 characters only where it stands alone (not inside a word or a dotted address)."""
    for piece in secrets:
        pattern = re.escape(piece)
        if len(piece) < 4:
            pattern = rf"(?<![\w.-]){pattern}(?![\w.-])"
        text = re.sub(pattern, "***", text)
    return text


def _shown(value: object) -> str:
    """A URL as printed: cleaned as the spans' URLs are (origin and path). One that is not a URL
    otel-a2a can read is shown as given only when it cannot hold credentials, a query or a
    fragment (no ``@``, ``?`` or ``#``), else as ``_INVALID``."""
    cleaned = clean_url(value)
    if cleaned == INVALID_URL and isinstance(value, str) and not re.search("[@?#]", value):
        return value[:200]
    return cleaned


def _problems(
    doc: dict[str, Any], card: CardInfo, report: CardReport, etag_header: str | None
) -> None:
    interfaces = doc.get("supportedInterfaces")
    if interfaces is None and "url" in doc:
        report.warnings.append(
            "v0.3-style card (no supportedInterfaces): a v1.0 client may not find an interface"
        )
        missing = [key for key in _REQUIRED_V03 if key not in doc]
        if missing:
            report.errors.append("missing required v0.3 fields: " + ", ".join(missing))
        url = doc.get("url")
        if not _absolute(url):
            report.errors.append(f"url is not an absolute URL: {_shown(url)!r}")
    else:
        missing = [key for key in _REQUIRED_V1 if key not in doc]
        if missing:
            report.errors.append("missing required v1.0 fields: " + ", ".join(missing))
    if interfaces is not None and not isinstance(interfaces, list):
        report.errors.append("supportedInterfaces is not an array")
        interfaces = None
    for i, entry in enumerate(interfaces or []):
        if not isinstance(entry, dict):
            report.errors.append(f"supportedInterfaces[{i}] is not an object")
            continue
        for key in ("url", "protocolBinding", "protocolVersion"):
            if not entry.get(key):
                report.errors.append(f"supportedInterfaces[{i}].{key} is required")
        url = entry.get("url")
        if isinstance(url, str) and not _absolute(url):
            report.errors.append(f"supportedInterfaces[{i}].url is not absolute: {_shown(url)!r}")
        binding = entry.get("protocolBinding")
        if isinstance(binding, str) and binding not in _BINDINGS and ":" not in binding:
            report.warnings.append(
                f"supportedInterfaces[{i}].protocolBinding {binding!r} is "
                "neither standard nor a URI"
            )
    if etag_header is None:
        report.warnings.append(
            "no ETag header (spec §8.6 SHOULD): otel-a2a hashes the card "
            "(JCS), so any byte of change counts as a redeploy"
        )
    if card.max_age is None:
        report.warnings.append(
            "no Cache-Control max-age (spec §8.6 SHOULD): clients pick their own card TTL"
        )
    if card.heartbeat is None:
        report.warnings.append(
            "no heartbeat declared (extension urn:otel-a2a:heartbeat:v1 or "
            "heartbeatInterval): OTEL_A2A_DEFAULT_HEARTBEAT applies"
        )


def _absolute(url: object) -> bool:
    """Whether ``url`` is a URL with a host (``urlsplit`` raises for some it cannot read)."""
    try:
        return isinstance(url, str) and bool(urlsplit(url).netloc)
    except ValueError:
        return False


def check_card(url: str) -> CardReport:
    """Fetch, parse and revalidate the card; never raises for network or wire problems.

    Runs :func:`check_card_async` in an event loop of its own on a thread of its own, so that it
    also works where an event loop is running already, and waits for it at most
    ``ABANDON_AFTER`` seconds: a name lookup held by the system resolver cannot be cancelled
    (asyncio runs it on a worker thread that closing the loop would wait for)."""
    answer: Future[CardReport] = Future()

    def run() -> None:
        try:
            answer.set_result(anyio.run(check_card_async, url))
        except BaseException as exc:  # re-raised on the caller's thread by result()
            answer.set_exception(exc)

    threading.Thread(target=run, name="otel-a2a check-card", daemon=True).start()
    try:
        return answer.result(ABANDON_AFTER)
    except FuturesTimeout:
        report = CardReport(_shown(card_url(url)))
        report.errors.append(
            f"fetch failed: no answer after {ABANDON_AFTER:g} s (name resolution?)"
        )
        return report


def _reason(exc: BaseException, url: str) -> str:
    """``Type: message`` with the innermost message of the cause chain: httpx's async transport
    says "All connection attempts failed" (or nothing, for a TLS handshake cut short) where the
    socket error underneath says what happened. Pieces of ``url`` that may be credentials are
    scrubbed (httpx quotes the part of a URL it cannot parse); a redirect's unparseable
    ``Location``, which may hold credentials of its own, is not quoted at all."""
    message, inner, depth = str(exc), exc.__cause__ or exc.__context__, 0
    if message.startswith(_LOCATION_ERROR):
        return f"{type(exc).__name__}: {_LOCATION_ERROR}"
    while inner is not None and depth < 8:
        message = str(inner) or message
        inner, depth = inner.__cause__ or inner.__context__, depth + 1
    return f"{type(exc).__name__}: {_scrub(message, _secrets(url))}"


async def check_card_async(url: str, client: httpx.AsyncClient | None = None) -> CardReport:
    """:func:`check_card` for a caller already in an event loop (asyncio or trio)."""
    target = card_url(url)
    report = CardReport(_shown(target))
    own = client is None
    http = client or httpx.AsyncClient(timeout=10.0, follow_redirects=True)
    try:
        try:
            response, body = await _get(http, target)
        except (*_FETCH_ERRORS, _FetchRefused) as exc:
            report.errors.append(f"fetch failed: {_reason(exc, url)}")
            return report
        if response.history:
            report.redirected_to = _shown(str(response.url))
        report.status = response.status_code
        report.cache_control = response.headers.get("cache-control")
        if response.status_code != 200:
            report.errors.append(f"card fetch answered HTTP {response.status_code}")
            return report
        card = parse_card(200, response.headers, body)
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested thousands deep
            doc = None
        if card is None or not isinstance(doc, dict):
            report.errors.append("the body is not a JSON Agent Card")
            return report
        report.card = card
        etag_header = response.headers.get("etag")
        _problems(doc, card, report, etag_header)
        if etag_header is not None:
            try:
                again, _ = await _get(http, target, {"If-None-Match": etag_header})
            except (*_FETCH_ERRORS, _FetchRefused) as exc:
                report.revalidation = f"failed: {type(exc).__name__}"
                report.warnings.append(f"revalidation failed: {_reason(exc, url)}")
                return report
            if again.status_code == 304:
                report.revalidation = "304 Not Modified (If-None-Match honoured)"
            else:
                report.revalidation = f"HTTP {again.status_code} (If-None-Match ignored)"
                report.warnings.append(
                    "If-None-Match not honoured: every revalidation downloads the card again"
                )
        return report
    finally:
        if own:
            await http.aclose()


def render(report: CardReport) -> str:
    lines = [f"card        {report.url}  (HTTP {report.status})"]
    if report.redirected_to is not None:
        lines.append(f"redirected  to {report.redirected_to}")
    card = report.card
    if card is not None:
        lines += [
            f"name        {card.name}",
            f"version     {card.version}",
            f"protocols   {', '.join(card.protocol_versions) or 'none declared'}",
            f"streaming   {card.streaming}",
            f"etag        {card.etag}  (from {card.etag_source})",
            f"caching     {report.cache_control or 'no Cache-Control'}; "
            f"revalidation: {report.revalidation}",
            "heartbeat   "
            + (
                f"{card.heartbeat:g} s (from {card.heartbeat_source})"
                if card.heartbeat is not None
                else "none declared"
            ),
            "interfaces",
            *(
                f"  {i.binding:<10} {i.protocol_version or '?':<5} {_shown(i.url)}"
                for i in card.interfaces
            ),
        ]
    lines += [f"ERROR       {e}" for e in report.errors]
    lines += [f"warning     {w}" for w in report.warnings]
    lines.append(
        "result      "
        + ("unusable" if report.exit_code == 2 else "problems found" if report.errors else "ok")
    )
    return "\n".join(lines)

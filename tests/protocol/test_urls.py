"""What of a URL may be recorded: never userinfo, query or fragment, whatever the input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_a2a.protocol.urls import INVALID_URL, URLParts, clean_url, split_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://Worker:9001/a2a/v1?x=1#f", "http://worker:9001/a2a/v1"),
        ("HTTPS://user:pw@Example.COM:443/x", "https://example.com/x"),
        ("http://example.com:80/", "http://example.com/"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        ("  http://h/a?k=v  ", "http://h/a"),
        ("grpc://u:p@h:50051", "grpc://h:50051"),
        # cannot be read safely: a constant, never a cut-down copy of the input
        ("http://u:secret@h:99999/a", INVALID_URL),  # port out of range
        ("http://u:secret@[::1/a", INVALID_URL),  # unclosed IPv6 bracket
        ("u:secret@h:8080/a", INVALID_URL),  # no scheme
        ("//u:secret@h/a", INVALID_URL),  # no scheme
        ("http://u:secret/x@h/a", INVALID_URL),  # '/' in the password: port "secret"
        ("http://u/x:secret@h/a", INVALID_URL),  # '/' in the user name: host "u"
        ("http://u:secret@", INVALID_URL),  # no host
        ("not a url?q=secret", INVALID_URL),
        ("", INVALID_URL),
        (None, INVALID_URL),
        (42, INVALID_URL),
    ],
)
def test_clean_url(url: object, expected: str) -> None:
    assert clean_url(url) == expected


def test_split_url_parts() -> None:
    assert split_url("https://u:p@Agent.Test:8443/a/b?q#f") == URLParts(
        "https://agent.test:8443", "agent.test:8443", "/a/b"
    )
    assert split_url("http://h:99999/") is None


SECRET = "zq9PLANTzq9"
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@settings(max_examples=400)
@given(
    st.sampled_from(["http", "https", "HTTP", "", "grpc", "x"]),
    st.sampled_from(["://", ":", "//", ":///", ""]),
    _TEXT,
    st.sampled_from(["127.0.0.1", "[::1]", "[::1", "h", "", "h:99999", "h:-1", "h:8:9"]),
    _TEXT,
    st.sampled_from(["?", "#", "?a=", "#?", "?@", "#/"]),
)
def test_a_planted_secret_never_survives(
    scheme: str, sep: str, user: str, host: str, path: str, tail: str
) -> None:
    """The secret as password, query or fragment, in any shape of URL around it: what is
    recorded never holds it (a secret in the host or path is an address, not a credential)."""
    for url in (
        f"{scheme}{sep}{user}:{SECRET}@{host}/{path}",
        f"{scheme}{sep}{host}/{path}{tail}{SECRET}",
        f"{scheme}{sep}{user}:{SECRET}@{host}/{path}{tail}{SECRET}",
    ):
        assert SECRET not in clean_url(url), url

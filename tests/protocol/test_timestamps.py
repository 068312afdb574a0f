"""``status.timestamp`` parsing: the spellings both SDKs and ProtoJSON produce, nothing raises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from otel_a2a.protocol import parse_timestamp


def test_sdk_spellings() -> None:
    python = parse_timestamp("2026-12-02T15:00:13.167426Z")  # a2a-sdk
    node = parse_timestamp("2026-12-02T15:01:21.725Z")  # @a2a-js/sdk
    nanos = parse_timestamp("2026-12-02T15:00:13.167426999Z")  # ProtoJSON, 9 digits
    assert python is not None and node is not None and nanos is not None
    assert abs(node - python - 68.557574) < 1e-6
    assert abs(nanos - python) < 1e-6
    assert parse_timestamp("2026-12-02T16:00:13.167426+01:00") == python
    assert parse_timestamp("2026-12-02T15:00:13.167426") == python  # no offset: UTC


def test_not_timestamps() -> None:
    for value in (None, 3, "", "yesterday", "2026-13-40T99:00:00Z", "Z", "x" * 100):
        assert parse_timestamp(value) is None


@given(st.text(max_size=70))
def test_never_raises(text: str) -> None:
    parse_timestamp(text)

"""RFC 8785 (JCS) canonicalisation against the RFC's own examples."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import from_json

from otel_a2a.protocol.jcs import (
    CanonicalizationError,
    _plain,
    _write,
    canonicalize,
    es6_number,
    jcs_sha256,
)


def from_bits(bits: int) -> float:
    return float(struct.unpack(">d", bits.to_bytes(8, "big"))[0])


@pytest.mark.parametrize(
    ("bits", "text"),
    [  # RFC 8785 Appendix B
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"),
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7FEFFFFFFFFFFFFF, "1.7976931348623157e+308"),
        (0xFFEFFFFFFFFFFFFF, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"),
        (0xC340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44B52D02C7E14AF5, "9.999999999999997e+22"),
        (0x44B52D02C7E14AF6, "1e+23"),
        (0x44B52D02C7E14AF7, "1.0000000000000001e+23"),
        (0x444B1AE4D6E2EF4E, "999999999999999700000"),
        (0x444B1AE4D6E2EF4F, "999999999999999900000"),
        (0x444B1AE4D6E2EF50, "1e+21"),
        (0x3EB0C6F7A0B5ED8C, "9.999999999999997e-7"),
        (0x3EB0C6F7A0B5ED8D, "0.000001"),
        (0x41B3DE4355555553, "333333333.3333332"),
        (0x41B3DE4355555554, "333333333.33333325"),
        (0x41B3DE4355555555, "333333333.3333333"),
        (0x41B3DE4355555556, "333333333.3333334"),
        (0x41B3DE4355555557, "333333333.33333343"),
        (0xBECBF647612F3696, "-0.0000033333333333333333"),
        (0x43143FF3C1CB0959, "1424953923781206.2"),
    ],
)
def test_rfc8785_numbers(bits: int, text: str) -> None:
    assert es6_number(from_bits(bits)) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (-0.0, "0"),
        (333333333.33333329, "333333333.3333333"),
        (4.5, "4.5"),
        (0.002, "0.002"),
        (1e-27, "1e-27"),
        (1e30, "1e+30"),
        (100.0, "100"),
        (1.5e-7, "1.5e-7"),
        (123.456, "123.456"),
    ],
)
def test_es6_numbers(value: float, text: str) -> None:
    assert es6_number(value) == text


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_has_no_form(value: float) -> None:
    with pytest.raises(CanonicalizationError):
        es6_number(value)
    assert jcs_sha256([value]) is None


def test_rfc8785_main_example() -> None:
    source = (
        b'{\n  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n'
        b'  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
        b'  "literals": [null, true, false]\n}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    ).encode()
    assert canonicalize(from_json(source)) == expected


def test_rfc8785_key_sorting_by_utf16_code_units() -> None:
    source = (
        b'{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dag'
        b'esh","1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"L'
        b'atin Small Letter O With Diaeresis"}'
    )
    values = list(json.loads(canonicalize(from_json(source))).values())
    assert values == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]


def test_integers_and_literals() -> None:
    assert canonicalize({"b": [1, -2, 0], "a": {"z": None, "y": True}}) == (
        b'{"a":{"y":true,"z":null},"b":[1,-2,0]}'
    )
    assert canonicalize(2**60) == b"1152921504606847000"  # as ECMAScript prints the double
    assert canonicalize(2**53 + 1) == b"9007199254740992"  # JCS numbers are doubles
    with pytest.raises(CanonicalizationError):
        canonicalize(10**400)
    with pytest.raises(CanonicalizationError):
        canonicalize({1: "non-string key"})
    with pytest.raises(CanonicalizationError):
        canonicalize(object())


def test_deep_nesting_is_refused_not_crashing() -> None:
    value: object = []
    for _ in range(5000):
        value = [value]
    assert jcs_sha256(value) is None


def test_sha256_of_canonical_form() -> None:
    digest = hashlib.sha256(b'{"a":1,"b":2}').hexdigest()
    assert jcs_sha256({"b": 2, "a": 1}) == "sha256:" + digest


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_canonical_form_round_trips_and_is_a_fixed_point(value: object) -> None:
    once = canonicalize(value)
    assert canonicalize(from_json(once)) == once
    assert json.loads(once, parse_int=float) == json.loads(json.dumps(value), parse_int=float)


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_es6_numbers_round_trip(value: float) -> None:
    assert float(es6_number(value)) == value


def _general(value: object) -> bytes:
    out: list[str] = []
    _write(value, out, 0)
    return "".join(out).encode("utf-8")


KEYS = st.text(alphabet=st.sampled_from('az\x00\n"\\\u00f6\u20ac\ufb33\U0001f600'), max_size=4)
ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-4, 9.999e-5, 1e16, 9.5e15, 2.0**53 - 0.5, 0.1, -1.5, 1e21, 5e-324])
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=4), inner),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(ANY_JSON)
def test_the_fast_path_writes_what_the_general_one_does(value: object) -> None:
    assert canonicalize(value) == _general(value)


def test_a_card_takes_the_fast_path_and_odd_values_the_general_one() -> None:
    card = {
        "name": "worker",
        "version": "1.0.0",
        "capabilities": {"streaming": True, "extensions": [{"params": {"intervalSeconds": 30}}]},
        "skills": [{"id": "s", "tags": ["a", "b"], "description": "caf\u00e9 \U0001f600"}],
    }
    assert _plain(card)
    assert _plain({"heartbeat": 1.5, "ratio": -0.0001})  # spelled alike
    assert not _plain({"heartbeat": 30.0})  # ECMAScript writes 30
    assert not _plain({"x": 1e-05})  # ECMAScript writes 0.00001
    assert not _plain({"n": [2**53 + 1]})  # beyond a double's integers
    assert not _plain({"\U0001f600": 1})  # sorted by UTF-16 code units
    assert not _plain([("tuple",)])

"""RFC 8785 JSON Canonicalization Scheme (JCS).

The card etag falls back to a hash of the card's canonical form, so that two byte-different
serialisations of the same card (key order, whitespace, number spelling) get the same etag; JCS
is what the A2A spec already uses to sign cards.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable

_MAX_DEPTH = 256  # deeper than any card; bounds recursion for arbitrary Python input
_SAFE_INT = 2**53


class CanonicalizationError(ValueError):
    """The value has no JCS form (NaN, infinity, a non-JSON type, or nesting too deep)."""


def es6_number(x: float) -> str:
    """Serialise a double as ECMAScript ``Number.prototype.toString`` does (RFC 8785 §3.2.2.3)."""
    if math.isnan(x) or math.isinf(x):
        raise CanonicalizationError("NaN and Infinity have no JSON form")
    if x == 0:
        return "0"  # also -0
    sign = "-" if x < 0 else ""
    # repr gives the shortest round-tripping digits, as ECMAScript requires.
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    if frac_part == "0":
        frac_part = ""
    digits = (int_part + frac_part).lstrip("0")
    # n: position of the decimal point relative to the first significant digit.
    n = len(int_part.lstrip("0")) if int_part.strip("0") else -(len(frac_part) - len(digits))
    n += int(exp_text) if exp_text else 0
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp = ("+" if e >= 0 else "-") + str(abs(e))
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + exp
    return sign + out


def _utf16_key(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare like the sequence of UTF-16 code units.
    return key.encode("utf-16-be", "surrogatepass")


def _write(value: object, out: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise CanonicalizationError("nesting too deep")
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        if -_SAFE_INT <= value <= _SAFE_INT:
            out.append(str(value))
        else:  # JSON numbers are IEEE 754 doubles under JCS
            try:
                out.append(es6_number(float(value)))
            except OverflowError as exc:
                raise CanonicalizationError("number out of double range") from exc
    elif isinstance(value, float):
        out.append(es6_number(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key in sorted(value, key=_utf16_key_checked):
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write(value[key], out, depth + 1)
        out.append("}")
    else:
        raise CanonicalizationError(f"not a JSON value: {type(value).__name__}")


def _utf16_key_checked(key: object) -> bytes:
    if not isinstance(key, str):
        raise CanonicalizationError("object keys must be strings")
    return _utf16_key(key)


def _plain(value: object) -> bool:
    """Whether ``json.dumps(sort_keys=True)`` writes ``value``'s JCS form, which it does unless
    the value holds an integer beyond 2**53 or a float that ECMAScript spells differently from
    ``repr`` (integral values, exponents: ``1.0`` is ``1``, ``1e-05`` is ``0.00001``), an object
    key outside the BMP (JCS sorts keys by UTF-16 code units, Python by code points), a non-JSON
    type, or deep nesting. Cards rarely hold any of these, and the C encoder is some 30 times
    faster than :func:`_write` on the application's thread.
    """
    if type(value) is not dict and type(value) is not list:
        return False  # a scalar: the general path is as fast
    stack: list[tuple[dict[object, object] | list[object], int]] = [(value, 0)]
    while stack:
        container, depth = stack.pop()
        if depth >= _MAX_DEPTH:
            return False
        items: Iterable[object] = container
        if isinstance(container, dict):
            for key in container:
                if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                    return False
            items = container.values()
        for item in items:
            if item is None or isinstance(item, (str, bool)):
                continue
            if isinstance(item, int):
                if type(item) is not int or not -_SAFE_INT <= item <= _SAFE_INT:
                    return False
            elif isinstance(item, float):
                # both write the shortest round-trip digits, in fixed notation in this range
                if item.is_integer() or not 1e-4 <= abs(item) < 1e16:
                    return False
            elif type(item) is dict or type(item) is list:
                stack.append((item, depth + 1))
            else:
                return False  # a tuple, anything else: the general path decides
    return True


def canonicalize(value: object) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value (as ``pydantic_core.from_json`` gives).

    Raises ``CanonicalizationError`` (a ``ValueError``) for values with no JCS form.
    """
    if _plain(value):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    else:
        out: list[str] = []
        _write(value, out, 0)
        text = "".join(out)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates
        raise CanonicalizationError("string is not valid Unicode") from exc


def jcs_sha256(value: object) -> str | None:
    """``"sha256:" + hex`` of the canonical form, or None when the value has no JCS form."""
    try:
        return "sha256:" + hashlib.sha256(canonicalize(value)).hexdigest()
    except (ValueError, RecursionError):
        return None

"""``status.timestamp`` of A2A tasks: ISO 8601 UTC, as ProtoJSON and both SDKs print it."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_LONG_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_timestamp(text: object) -> float | None:
    """Seconds since the epoch, or None for anything that is not an ISO 8601 timestamp.

    Accepts ``Z`` and numeric offsets and fractions of any length (ProtoJSON prints up to 9
    digits, Python's parser takes 6); a timestamp without offset is taken as UTC.
    """
    if not isinstance(text, str) or not 0 < len(text) <= 64:
        return None
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    value = _LONG_FRACTION.sub(r"\1", value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None

"""How ``OTEL_A2A_*`` values are spelled, and the one warning a bad value gets.

Shared by the interpreter-start hook, which must stay import-light (``logging`` is imported
only to warn), and by the settings: a bad ``OTEL_A2A_ENABLED`` seen by both is still one warning.
"""

from __future__ import annotations

from collections.abc import Mapping

TRUE = ("1", "true", "yes", "on")
FALSE = ("", "0", "false", "no", "off")

_warned: set[tuple[str, str]] = set()


def warn_invalid(name: str, value: str, default: object, why: str = "invalid") -> None:
    """Warn that ``name=value`` is ignored for ``default`` (``why``: what is wrong with it),
    once per variable and value."""
    if (name, value) in _warned:
        return
    _warned.add((name, value))
    import logging

    logging.getLogger("otel_a2a").warning(
        "otel-a2a: ignoring %s=%r (%s); using the default %r", name, value, why, default
    )


def parse_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    """``env[name]`` read as a boolean (any case, surrounding blanks ignored); unset gives
    ``default`` silently, a value that is neither true nor false warns and gives it too."""
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value not in FALSE:
        warn_invalid(name, raw, default)
        return default
    return False

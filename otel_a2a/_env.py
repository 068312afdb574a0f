"""How ``OTEL_A2A_*`` values are spelled, and the one warning a bad value gets.

Shared by the interpreter-start hook, which must stay import-light (``logging`` is imported
only to warn), and by the settings: a bad ``OTEL_A2A_ENABLED`` seen by both is still one warning.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's, nor collections.abc at run time: the start-up hook's cost
if TYPE_CHECKING:
    from collections.abc import Mapping

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


def parse_bool(env: Mapping[str, str], name: str) -> bool:
    """``env[name]`` read as OpenTelemetry's configuration specification reads a boolean:
    only ``true`` (any case) is true; unset, empty and ``false`` (any case) are false
    silently; any other value is false with one warning (``1``, ``yes`` and ``on`` too)."""
    value = env.get(name, "").lower()
    if value == "true":
        return True
    if value not in ("", "false"):
        warn_invalid(name, env[name], False)
    return False

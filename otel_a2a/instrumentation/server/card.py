"""The heartbeat a worker owes, advertised on its card (``OTEL_A2A_SERVE_HEARTBEAT``).

a2a-sdk serves the card through ``create_agent_card_routes``, whose ``card_modifier`` (public)
adjusts the card per request before a2a-sdk computes its weak ``ETag`` over what it serves: the
extension added there is covered by the ``ETag``, and ``If-None-Match`` still answers ``304``.
A card that declares the extension already keeps its own value.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Any

from otel_a2a.protocol.card import HEARTBEAT_EXTENSION_URI

DESCRIPTION = "Task liveness: a task's last authoritative state is fresh for this long"


def cache_control(seconds: float) -> str:
    """A caller revalidates the card (a ``304``) at least once per heartbeat: a redeploy that
    changes what the card says is seen within one."""
    return f"public, max-age={max(1, math.ceil(seconds))}"


def with_heartbeat(card: Any, seconds: float) -> Any:
    """A copy of ``card`` with the heartbeat extension, or ``card`` if it has one already."""
    if any(ext.uri == HEARTBEAT_EXTENSION_URI for ext in card.capabilities.extensions):
        return card
    copy = type(card)()
    copy.CopyFrom(card)
    extension = copy.capabilities.extensions.add(uri=HEARTBEAT_EXTENSION_URI)
    extension.description = DESCRIPTION
    extension.params.update({"intervalSeconds": seconds})
    return copy


def routes_arguments(
    wrapped: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    seconds: float,
    failed: Callable[[BaseException], None],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``create_agent_card_routes``'s arguments with the heartbeat added by a modifier run
    after the application's own, and a ``Cache-Control`` when the application gave none."""
    bound = inspect.signature(wrapped).bind(*args, **kwargs)
    own: Callable[[Any], Awaitable[Any]] | None = bound.arguments.get("card_modifier")

    async def modifier(card: Any) -> Any:
        if own is not None:
            card = await own(card)  # the application's failure is its own: not caught
        try:
            return with_heartbeat(card, seconds)
        except Exception as exc:  # served as the application made it
            failed(exc)
            return card

    bound.arguments["card_modifier"] = modifier
    if bound.arguments.get("cache_control") is None:
        bound.arguments["cache_control"] = cache_control(seconds)
    return bound.args, bound.kwargs

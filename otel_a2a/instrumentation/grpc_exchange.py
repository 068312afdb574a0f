"""The gRPC adapter of an exchange: protobuf replies, stream messages and a status into facts.

Messages are read by field access (``protocol.grpc``); every judgement is the core's
(``exchange.Exchange``). Its methods may be called from the application's thread or task, or
from grpc's callback thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from otel_a2a import semconv as sc
from otel_a2a.instrumentation.exchange import Exchange
from otel_a2a.instrumentation.runtime import Runtime
from otel_a2a.protocol import A2AError, A2ARequest, Binding, Operation
from otel_a2a.protocol import grpc as wire
from otel_a2a.protocol.card import extended_card

_EXTENDED_CARD = Operation.GET_EXTENDED_AGENT_CARD.value
_GRPC = Binding.GRPC.value  # every call here is of the gRPC binding
_OK = 0


class GrpcExchange(Exchange):
    __slots__ = ("_code_name",)

    def __init__(
        self, rt: Runtime, a2a: A2ARequest, origin: str, method: str, streaming: bool
    ) -> None:
        self._code_name = ""
        super().__init__(rt, a2a, rt.peer(origin + method, origin), _GRPC, origin)
        if streaming:
            self.stream_opened()

    def on_message(self, message: object) -> None:
        """A reply, or one message of a stream, as the application receives it."""
        if self.ended:
            return
        try:
            if self.op == _EXTENDED_CARD:
                self._card(message)
                return
            now = time.monotonic()
            facts = wire.response_facts(self.a2a.operation, message, self.a2a.version)
            if facts.reports or facts.error is not None:
                self.observe(facts, now)
            self.frame([r.task_id for r in facts.reports], now)  # any message keeps it alive
        except Exception as exc:
            self.rt.error(exc)

    def reply(self, message: object, code: Any) -> None:
        """A unary call's reply and its ``OK`` status: the whole exchange, in one step."""
        self.on_message(message)
        self.end(code)

    def _card(self, message: Any) -> None:
        """An extended card, read in its ProtoJSON form (the HTTP bindings' body), so both
        give it the same etag; a card is fetched rarely, unlike a task."""
        from google.protobuf.json_format import MessageToDict

        self.extended_card(extended_card(MessageToDict(message)))

    def end(
        self,
        code: Any = None,
        details: object = None,
        trailing_metadata: Iterable[tuple[str, Any]] | None = None,
        failure: BaseException | None = None,
    ) -> None:
        """The call ended: ``code`` a ``grpc.StatusCode`` when a status is known, ``failure``
        what the application got instead of a reply or the next message. Idempotent."""
        if self.ended:
            return
        try:
            self._status(code, details, trailing_metadata, failure)
        except Exception as exc:
            self.rt.error(exc)
        self.finish()

    def _status(
        self,
        code: Any,
        details: object,
        trailing_metadata: Iterable[tuple[str, Any]] | None,
        failure: BaseException | None,
    ) -> None:
        number = _code_number(code)
        if number is not None:
            self.set(sc.RPC_RESPONSE_STATUS_CODE, getattr(code, "name", str(number)))
        if number == _OK or (number is None and failure is None):
            return
        if number is None:  # no status: the failure is all there is
            kind = type(failure).__qualname__
            self.failed(kind, kind)
            return
        self._code_name = name = getattr(code, "name", str(number))
        self.on_error(
            wire.status_error(self.a2a, name, trailing_metadata, details), time.monotonic()
        )

    def describe(self, error: A2AError) -> tuple[str, str]:
        """``error.type`` of a failed status, as the A2A convention says: the status code's
        name; the description is the A2A error's reason when known."""
        kind = self._code_name or sc.ERROR_TYPE_OTHER
        return kind, error.reason or kind


def _code_number(code: Any) -> int | None:
    """The number of a ``grpc.StatusCode`` (its value is ``(number, name)``)."""
    value = getattr(code, "value", None)
    if isinstance(value, tuple) and value and isinstance(value[0], int):
        return value[0]
    return None

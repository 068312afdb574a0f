"""The A2A protocol bindings (``a2a.binding``): its own module, so that both the value types
(``model``) and the state vocabulary (``states``) name it without importing each other."""

from __future__ import annotations

from enum import Enum


class Binding(str, Enum):
    """Value of ``a2a.binding``."""

    JSONRPC = "JSONRPC"
    HTTP_JSON = "HTTP+JSON"
    GRPC = "GRPC"

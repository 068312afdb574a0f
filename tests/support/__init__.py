"""Helpers shared by the test suite: real peers, a fake agent, real Prometheus, an instrumented
run."""

from __future__ import annotations

import os
import socket

# otel-a2a's start-up warning when its Prometheus exporter could not bind its port
PORT_TAKEN = "could not set up OpenTelemetry (OSError: [Errno 98] Address already in use)"


def in_ci() -> bool:
    """``CI=true``: whatever a test needs must be there; a missing part fails, never skips."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, release)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port

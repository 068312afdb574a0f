"""Helpers shared by the test suite: real peers, real Prometheus, an instrumented run."""

from __future__ import annotations

import os


def in_ci() -> bool:
    """``CI=true``: whatever a test needs must be there; a missing part fails, never skips."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}

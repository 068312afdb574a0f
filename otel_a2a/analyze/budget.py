"""The detector's memory budget (``--max-memory-mb``) shared out between what it holds.

Whatever an unauthenticated client sends, the detector's memory stays within one stated
figure, 256 MiB by default. Past the process's own baseline (the interpreter and its
libraries, measured), the rest goes in fixed shares:

- half to decoding one request body: a protobuf body takes up to ``AMPLIFICATION`` times its
  size while decoded (a body of empty spans, the worst measured), so the largest body accepted
  is that half divided by it (1.1 MiB at 256 MiB) unless ``--max-body-bytes`` asks for less;
- an eighth to request bodies held at once (received, or waiting for the decoder);
- a quarter to the correlator's task records (beliefs and reported pairs);
- an eighth to its parent-span map.

Each structure counts its entries in bytes from measured per-entry costs
(:mod:`otel_a2a.analyze.correlate`), so its cap follows the budget.
"""

from __future__ import annotations

from typing import NamedTuple

MIB = 1024 * 1024
DEFAULT_MAX_MEMORY_MB = 256
# RSS of a detector after its first protobuf and JSON requests, its metrics served (CPython
# 3.11, opentelemetry-sdk 1.45, protobuf 7.36 upb): 42 MiB measured; 48 reserved
BASELINE_MB = 48
MIN_MAX_MEMORY_MB = BASELINE_MB + 16
# Bytes a protobuf body takes while decoded (upb), per byte of body, at worst: a body of empty
# spans, 86 measured (empty spans each with one empty attribute 66, spans with a one-letter
# name 35, a JSON body of empty objects less); rounded up
AMPLIFICATION = 96
MAX_BODY_CEILING = 16 * MIB  # never more than this, however large the budget


class Shares(NamedTuple):
    """Bytes each structure may hold."""

    max_body: int  # the largest request body, after decompression
    bodies: int  # request bodies held at once
    tasks: int  # the correlator's task records
    links: int  # its parent-span map


def shares(max_memory_mb: int = DEFAULT_MAX_MEMORY_MB, max_body: int | None = None) -> Shares:
    """The shares of a budget of ``max_memory_mb`` MiB; ``ValueError`` when it is below
    ``MIN_MAX_MEMORY_MB`` or ``max_body`` does not fit it."""
    if max_memory_mb < MIN_MAX_MEMORY_MB:
        raise ValueError(
            f"--max-memory-mb {max_memory_mb} is below the minimum of {MIN_MAX_MEMORY_MB} "
            f"(the process itself takes about {BASELINE_MB} MiB)"
        )
    rest = (max_memory_mb - BASELINE_MB) * MIB
    fits = rest // 2 // AMPLIFICATION
    if max_body is None:
        max_body = min(MAX_BODY_CEILING, fits)
    elif max_body > fits:
        needed = BASELINE_MB + -(-2 * AMPLIFICATION * max_body // MIB)
        raise ValueError(
            f"--max-body-bytes {max_body} needs --max-memory-mb {needed} or more "
            f"(a body takes up to {AMPLIFICATION} times its size while decoded)"
        )
    return Shares(max_body, rest // 8, rest // 4, rest // 8)

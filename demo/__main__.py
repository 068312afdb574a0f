"""``python -m demo [options]`` from the repository root: the same as ``otel-a2a demo``."""

from __future__ import annotations

import sys

from otel_a2a.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))

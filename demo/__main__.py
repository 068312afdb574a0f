"""``python -m demo [options]`` from the repository root (``make demo``)."""

from __future__ import annotations

import sys

from demo.cli import main

if __name__ == "__main__":
    sys.exit(main())

"""Placeholder: replaced by the instrumentation work (issue 4)."""


def run() -> None:
    """Entry of the ``.start`` file (Python >= 3.15)."""

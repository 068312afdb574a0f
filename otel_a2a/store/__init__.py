"""Ledgers that live outside the process: the stores behind the ``Ledger`` seam.

``otel_a2a.detect.ledger.Ledger`` is what the detector asks of a ledger; the in-memory
``TaskLedger`` answers it in one process. A store here answers it for several: the processes
of one host share one SQLite file (``OTEL_A2A_LEDGER_PATH``, :mod:`otel_a2a.store.sqlite`).
A store shared across hosts would be another module here (docs/architecture.md says what it
would have to change: the clock).
"""

from __future__ import annotations

from otel_a2a.store.sqlite import BUSY_TIMEOUT, SCHEMA_VERSION, LedgerStoreError, SqliteLedger

__all__ = ["BUSY_TIMEOUT", "SCHEMA_VERSION", "LedgerStoreError", "SqliteLedger"]

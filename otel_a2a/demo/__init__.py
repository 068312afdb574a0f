"""The seeded incident on loopback: ``otel-a2a demo`` and the end-to-end tests.

``scenario`` runs it; ``orchestrator`` (a plain a2a-sdk client, instrumented only through
``OTEL_A2A_ENABLED``), ``gateway`` (Python) and ``node/worker.mjs`` (@a2a-js/sdk) are the three
processes it starts.
"""

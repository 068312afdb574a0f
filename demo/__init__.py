"""The seeded incident on loopback: ``python -m demo`` (``make demo``) and the end-to-end tests.

It ships in the source tree, not in the ``otel-a2a`` wheel. ``scenario`` runs one variant (its
``__all__`` is the public entry: ``run_scenario``, ``ScenarioConfig``, ``render``, ...) with
the processes that ``processes`` starts: ``orchestrator`` (a plain a2a-sdk client,
instrumented only through ``OTEL_A2A_ENABLED``), ``gateway`` (Python) and ``node/worker.mjs``
(@a2a-js/sdk); ``evaluation`` judges what they exported, ``rendering`` prints the report and
``cli`` holds the command's options. Nothing is imported here, so that ``--help`` stays light.
"""

"""Layer 2: the pure detection core (no I/O, no OpenTelemetry).

:class:`TaskLedger` keeps the last authoritative observation per task, :class:`CardRegistry`
the card etag and heartbeat per agent, :mod:`~otel_a2a.detect.invariant` judges them, and
:class:`Detector` ties the three into the calls the instrumentation makes.
"""

from otel_a2a.detect.api import assert_state_authoritative
from otel_a2a.detect.detector import Agent, AgentView, CardUpdate, Detector
from otel_a2a.detect.invariant import (
    assumes_live,
    is_redundant_get,
    judge_decision,
    judge_observation,
    judge_task_not_found,
)
from otel_a2a.detect.ledger import Observation, TaskLedger
from otel_a2a.detect.registry import DEFAULT_HEARTBEAT, CardRegistry
from otel_a2a.detect.verdict import DivergenceReason, Evidence, TaskStateDivergenceError, Verdict

__all__ = [
    "DEFAULT_HEARTBEAT",
    "Agent",
    "AgentView",
    "CardRegistry",
    "CardUpdate",
    "Detector",
    "DivergenceReason",
    "Evidence",
    "Observation",
    "TaskLedger",
    "TaskStateDivergenceError",
    "Verdict",
    "assert_state_authoritative",
    "assumes_live",
    "is_redundant_get",
    "judge_decision",
    "judge_observation",
    "judge_task_not_found",
]

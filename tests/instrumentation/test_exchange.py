"""The exchange core's pure rules (``otel_a2a.instrumentation.exchange``)."""

from __future__ import annotations

from otel_a2a.instrumentation.exchange import Attributes, state_attributes
from otel_a2a.protocol import Binding, read_state

V1, V03 = "1.0", "0.3"


def test_a_state_spelt_as_the_convention_carries_no_spelling() -> None:
    attrs = state_attributes({}, read_state("TASK_STATE_WORKING", V1, Binding.JSONRPC))
    assert attrs == {"a2a.task.state": "TASK_STATE_WORKING"}


def test_another_spelling_is_kept_beside_the_convention_value() -> None:
    attrs = state_attributes({}, read_state("working", V03, Binding.JSONRPC))
    assert attrs == {"a2a.task.state": "TASK_STATE_WORKING", "otel_a2a.task.state.raw": "working"}
    cancelled = state_attributes({}, read_state("TASK_STATE_CANCELLED", V03, Binding.GRPC))
    assert cancelled["otel_a2a.task.state.raw"] == "TASK_STATE_CANCELLED"


def test_the_convention_spelling_where_it_is_not_exact_is_kept() -> None:
    """v0.3 JSON-RPC spells states in kebab case: the proto name there is non-canonical, and
    a reader of the span must be able to tell (an absent spelling reads as exact)."""
    reading = read_state("TASK_STATE_WORKING", V03, Binding.JSONRPC)
    assert not reading.exact
    attrs = state_attributes({}, reading)
    assert attrs["otel_a2a.task.state.raw"] == "TASK_STATE_WORKING"


def test_a_later_state_leaves_no_earlier_spelling_behind() -> None:
    attrs: Attributes = {}
    state_attributes(attrs, read_state("Working", V1, Binding.JSONRPC))
    assert attrs["otel_a2a.task.state.raw"] == "Working"
    state_attributes(attrs, read_state("TASK_STATE_COMPLETED", V1, Binding.JSONRPC))
    assert attrs == {"a2a.task.state": "TASK_STATE_COMPLETED"}

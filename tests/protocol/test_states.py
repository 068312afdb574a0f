"""State normalisation and exact-spelling rules (``non_canonical_state``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_a2a.protocol.model import Binding
from otel_a2a.protocol.states import TaskState, normalize_task_state, read_state

S = TaskState


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("TASK_STATE_UNSPECIFIED", S.UNKNOWN),
        ("TASK_STATE_SUBMITTED", S.SUBMITTED),
        ("TASK_STATE_WORKING", S.WORKING),
        ("TASK_STATE_COMPLETED", S.COMPLETED),
        ("TASK_STATE_FAILED", S.FAILED),
        ("TASK_STATE_CANCELED", S.CANCELED),
        ("TASK_STATE_CANCELLED", S.CANCELED),
        ("TASK_STATE_INPUT_REQUIRED", S.INPUT_REQUIRED),
        ("TASK_STATE_REJECTED", S.REJECTED),
        ("TASK_STATE_AUTH_REQUIRED", S.AUTH_REQUIRED),
        ("unknown", S.UNKNOWN),
        ("submitted", S.SUBMITTED),
        ("working", S.WORKING),
        ("Working", S.WORKING),
        ("input-required", S.INPUT_REQUIRED),
        ("input_required", S.INPUT_REQUIRED),
        ("auth-required", S.AUTH_REQUIRED),
        ("cancelled", S.CANCELED),
        ("canceled", S.CANCELED),
        ("unspecified", S.UNKNOWN),
        ("task_state_completed", S.COMPLETED),
        ("paused", S.UNKNOWN),
        ("UNRECOGNIZED", S.UNKNOWN),
        ("TASK_STATE_RUNNING", S.UNKNOWN),
        ("", S.UNKNOWN),
        (None, S.UNKNOWN),
        (True, S.UNKNOWN),
        (3.0, S.UNKNOWN),
        ([], S.UNKNOWN),
    ],
)
def test_normalize(raw: object, expected: TaskState) -> None:
    assert normalize_task_state(raw) is expected


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (0, S.UNKNOWN),
        (1, S.SUBMITTED),
        (2, S.WORKING),
        (3, S.COMPLETED),
        (4, S.FAILED),
        (5, S.CANCELED),
        (6, S.INPUT_REQUIRED),
        (7, S.REJECTED),
        (8, S.AUTH_REQUIRED),
        (9, S.UNKNOWN),
        (-1, S.UNKNOWN),
    ],
)
def test_normalize_enum_numbers(number: int, expected: TaskState) -> None:
    assert normalize_task_state(number) is expected


@settings(max_examples=200)
@given(st.one_of(st.text(max_size=40), st.integers(), st.none(), st.booleans(), st.floats()))
def test_normalize_is_idempotent(raw: object) -> None:
    once = normalize_task_state(raw)
    assert normalize_task_state(once.value) is once


@settings(max_examples=100)
@given(st.sampled_from([s.value for s in TaskState]))
def test_canonical_values_are_fixed_points(value: str) -> None:
    assert normalize_task_state(value).value == value


# The seed's vocabulary: its ``normalize_task_state`` was ``TaskState(raw.strip().lower())``
SEED_VALUES = (
    "submitted",
    "working",
    "input-required",
    "auth-required",
    "completed",
    "failed",
    "canceled",
    "rejected",
    "unknown",
)
_WHITESPACE = st.text(st.characters(categories=["Zs", "Zl", "Zp", "Cc"]).filter(str.isspace))


@st.composite
def seed_spellings(draw: st.DrawFn) -> str:
    """A seed value in any case, per character, with any whitespace around it."""
    value = draw(st.sampled_from(SEED_VALUES))
    upper = draw(st.lists(st.booleans(), min_size=len(value), max_size=len(value)))
    cased = "".join(c.upper() if u else c for c, u in zip(value, upper, strict=True))
    return draw(_WHITESPACE) + cased + draw(_WHITESPACE)


@settings(max_examples=500)
@given(seed_spellings())
def test_every_spelling_the_seed_accepts_maps_as_it_did(raw: str) -> None:
    assert normalize_task_state(raw) is TaskState(raw.strip().lower())


@pytest.mark.parametrize(
    "raw", [" WORKING\n", "Input-Required", "\tcompleted ", "CANCELED", " " * 100 + "failed"]
)
def test_seed_spellings(raw: str) -> None:
    assert normalize_task_state(raw) is TaskState(raw.strip().lower())


@settings(max_examples=300)
@given(seed_spellings(), st.sampled_from(["0.3", "1.0"]), st.sampled_from(list(Binding)))
def test_on_the_wire_such_spellings_map_and_stay_inexact(
    raw: str, version: str, binding: Binding
) -> None:
    """The observation side is unchanged: a spelling maps as normalisation says, and only
    the exact spellings of the version and binding are exact (v0.3 JSON-RPC: lowercase kebab
    as is), so any other case or whitespace is a ``non_canonical_state``."""
    reading = read_state(raw, version, binding)
    assert reading.mapped and reading.state is normalize_task_state(raw)
    exact_v03 = version == "0.3" and binding is not Binding.GRPC and raw in SEED_VALUES
    assert reading.exact is exact_v03


V1, V03 = "1.0", "0.3"
J, R, G = Binding.JSONRPC, Binding.HTTP_JSON, Binding.GRPC


@pytest.mark.parametrize(
    ("raw", "version", "binding", "state", "mapped", "exact"),
    [
        # v1.0, every binding: only TASK_STATE_* v1.0 names are exact
        ("TASK_STATE_COMPLETED", V1, J, S.COMPLETED, True, True),
        ("TASK_STATE_CANCELED", V1, R, S.CANCELED, True, True),
        ("TASK_STATE_CANCELLED", V1, J, S.CANCELED, True, False),
        ("TASK_STATE_CANCELLED", V1, G, S.CANCELED, True, False),
        ("TASK_STATE_UNSPECIFIED", V1, J, S.UNKNOWN, True, True),
        ("working", V1, J, S.WORKING, True, False),
        ("Working", V1, J, S.WORKING, True, False),
        ("TASK_STATE_WORKING", "1.5", G, S.WORKING, True, True),
        ("TASK_STATE_WORKING", "2.0", R, S.WORKING, True, True),
        # v0.3 JSON-RPC: lowercase kebab only
        ("input-required", V03, J, S.INPUT_REQUIRED, True, True),
        ("unknown", V03, J, S.UNKNOWN, True, True),
        ("canceled", V03, J, S.CANCELED, True, True),
        ("cancelled", V03, J, S.CANCELED, True, False),
        ("TASK_STATE_WORKING", V03, J, S.WORKING, True, False),
        ("Working", V03, J, S.WORKING, True, False),
        ("input_required", V03, J, S.INPUT_REQUIRED, True, False),
        # v0.3 gRPC: TASK_STATE_* with the British CANCELLED
        ("TASK_STATE_CANCELLED", V03, G, S.CANCELED, True, True),
        ("TASK_STATE_CANCELED", V03, G, S.CANCELED, True, False),
        ("TASK_STATE_WORKING", V03, G, S.WORKING, True, True),
        ("working", V03, G, S.WORKING, True, False),
        # v0.3 HTTP+JSON: either (the two SDKs differ)
        ("working", V03, R, S.WORKING, True, True),
        ("TASK_STATE_COMPLETED", V03, R, S.COMPLETED, True, True),
        ("TASK_STATE_CANCELLED", V03, R, S.CANCELED, True, True),
        ("TASK_STATE_CANCELED", V03, R, S.CANCELED, True, True),
        ("Working", V03, R, S.WORKING, True, False),
        # absent / garbage versions read as v0.3
        ("working", None, J, S.WORKING, True, True),
        ("working", "abc", J, S.WORKING, True, True),
        # unmappable
        ("paused", V1, J, S.UNKNOWN, False, False),
        ("UNRECOGNIZED", V03, G, S.UNKNOWN, False, False),
        ("", V1, J, S.UNKNOWN, False, False),
    ],
)
def test_read_state(
    raw: str,
    version: str | None,
    binding: Binding,
    state: TaskState,
    mapped: bool,
    exact: bool,
) -> None:
    reading = read_state(raw, version, binding)
    assert (reading.raw, reading.state, reading.mapped, reading.exact) == (
        raw,
        state,
        mapped,
        exact,
    )


@pytest.mark.parametrize(
    ("raw", "text", "mapped"),
    [
        (3, "3", True),
        (0, "0", True),
        (9, "9", False),
        (None, "", False),
        (True, "true", False),
        (2.0, "2.0", False),
        ({"state": "working"}, "", False),
        (["working"], "", False),
    ],
)
def test_read_state_non_strings(raw: object, text: str, mapped: bool) -> None:
    reading = read_state(raw, "1.0", Binding.JSONRPC)
    assert reading.raw == text
    assert reading.mapped is mapped
    assert reading.exact is False
    assert reading.state is (normalize_task_state(raw) if mapped else S.UNKNOWN)


def test_read_state_bounds_raw() -> None:
    reading = read_state("x" * 10_000, "1.0", Binding.JSONRPC)
    assert len(reading.raw) == 64
    assert not reading.mapped


@settings(max_examples=200)
@given(
    st.one_of(st.text(max_size=30), st.integers(), st.none(), st.floats(), st.booleans()),
    st.one_of(st.none(), st.text(max_size=8)),
    st.sampled_from(list(Binding)),
)
def test_read_state_never_raises_and_exact_implies_mapped(
    raw: object, version: str | None, binding: Binding
) -> None:
    reading = read_state(raw, version, binding)
    assert reading.state is normalize_task_state(raw) or not reading.mapped
    assert reading.mapped or reading.state is S.UNKNOWN
    assert not reading.exact or reading.mapped

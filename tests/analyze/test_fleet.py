"""The fleet judge on spans of services without otel-a2a: each reason, order, not twice."""

from __future__ import annotations

from collections.abc import Mapping

from otel_a2a.analyze.fleet import CLIENT, Act, FleetJudge, ServiceFinding, span_acts

S = 1_000_000_000
T0 = 1_700_000_000 * S
AGENT = {"server.address": "worker.test", "server.port": 9000, "gen_ai.agent.name": "worker"}


def span(
    service: str,
    method: str,
    start: float,
    end: float | None = None,
    *,
    task: str = "t1",
    state: str | None = None,
    kind: int = CLIENT,
    **extra: object,
) -> list[Act]:
    attrs: dict[str, object] = {"a2a.method.name": method, **AGENT}
    if task:
        attrs["a2a.task.id"] = task
    if state is not None:
        attrs["a2a.task.state"] = state
    attrs.update({k.replace("__", "."): v for k, v in extra.items()})
    return acts_of(service, attrs, start, start if end is None else end, kind)


def acts_of(
    service: str, attrs: Mapping[str, object], start: float, end: float, kind: int = CLIENT
) -> list[Act]:
    return span_acts(
        service, False, kind, attrs, T0 + int(start * S), T0 + int(end * S), (), "ab" * 8, "cd" * 16
    )


def judged(*spans: list[Act], hold: float = 0.0, **options: object) -> list[ServiceFinding]:
    judge = FleetJudge(hold=hold, **options)  # type: ignore[arg-type]
    return judge.feed([a for acts in spans for a in acts], 0.0) + judge.flush()


def reasons(found: list[ServiceFinding]) -> list[tuple[str, str, str]]:
    return [(f.reason.value, f.service, f.task_id) for f in found]


CREATED = span("orchestrator", "SendMessage", 0, 0.1, state="TASK_STATE_SUBMITTED")


def test_a_send_that_created_its_task_is_no_decision_a_follow_up_on_it_is() -> None:
    assert judged(CREATED) == []
    # the gateway follows up on the task the orchestrator created: it never observed it
    gateway = span("gateway", "SendMessage", 1, 1.2, state="TASK_STATE_WORKING")
    found = judged(CREATED, gateway)
    assert reasons(found) == [("no_observation", "gateway", "t1")]
    assert found[0].operation == "SendMessage" and found[0].agent_name == "worker"


def test_a_forwarded_send_that_created_its_task_is_no_decision() -> None:
    """A gateway forwards the caller's first send: the caller's span starts first and names
    the task, but only by its reply, which came after the gateway's send started."""
    caller = span("orchestrator", "SendStreamingMessage", 0, 9, state="TASK_STATE_WORKING")
    forwarded = span("gateway", "SendStreamingMessage", 0.1, 8.9, state="TASK_STATE_WORKING")
    assert judged(caller, forwarded) == []
    # the caller's own otel-a2a span, still open, is no proof either
    attrs = {"a2a.method.name": "SendStreamingMessage", "a2a.task.id": "t1", **AGENT}
    ours = span_acts("orchestrator", True, CLIENT, attrs, T0, T0 + 9 * S, (), "", "")
    assert judged(ours, forwarded) == []


def test_heartbeat_gap_terminal_state_and_fresh_observations() -> None:
    poll = span("gateway", "GetTask", 1, 1.1, state="TASK_STATE_WORKING")
    fresh = span("gateway", "CancelTask", 20)
    stale = span("gateway", "CancelTask", 40)
    assert judged(CREATED, poll, fresh) == []
    assert reasons(judged(CREATED, poll, stale)) == [("heartbeat_gap", "gateway", "t1")]
    # the default heartbeat, an override of the agent's host, and a card span's
    assert judged(CREATED, poll, stale, default_heartbeat=60.0) == []
    overridden = judged(CREATED, poll, fresh, heartbeat_overrides={"worker.test:9000": 5.0})
    assert reasons(overridden) == [("heartbeat_gap", "gateway", "t1")]
    card = span("gateway", "GetAgentCard", 0.5, task="", otel_a2a__card__heartbeat_interval=5.0)
    assert reasons(judged(card, CREATED, poll, fresh)) == [("heartbeat_gap", "gateway", "t1")]
    done = span("gateway", "GetTask", 1, 1.1, state="TASK_STATE_FAILED")
    assert reasons(judged(CREATED, done, fresh)) == [("terminal_state", "gateway", "t1")]


def test_interrupted_tasks_owe_no_heartbeat() -> None:
    asked = span("gateway", "GetTask", 1, 1.1, state="TASK_STATE_INPUT_REQUIRED")
    assert judged(CREATED, asked, span("gateway", "SendMessage", 500)) == []


def test_etag_changed_from_card_spans() -> None:
    v1 = span("gateway", "GetAgentCard", 0.5, task="", otel_a2a__card__etag='"v1"')
    v2 = span("gateway", "GetAgentCard", 2, task="", otel_a2a__card__etag='"v2"')
    poll = span("gateway", "GetTask", 1, 1.1, state="TASK_STATE_WORKING")
    found = judged(v1, CREATED, poll, v2, span("gateway", "CancelTask", 3))
    assert reasons(found) == [("etag_changed", "gateway", "t1")]
    assert (found[0].etag_observed, found[0].etag_now) == ('"v1"', '"v2"')


def test_observation_reasons_where_the_spans_say_them() -> None:
    working = span("gateway", "GetTask", 2, 2.1, state="TASK_STATE_WORKING")
    failed = span("gateway", "GetTask", 1, 1.1, state="TASK_STATE_FAILED")
    assert reasons(judged(CREATED, failed, working)) == [("terminal_regression", "gateway", "t1")]
    odd = span(
        "gateway", "GetTask", 1, 1.1, otel_a2a__task__state__raw="Working",
        a2a__protocol__version="1.0",
    )  # fmt: skip
    assert reasons(judged(odd)) == [("non_canonical_state", "gateway", "t1")]
    # without the raw spelling, the canonical value says nothing of the wire
    assert judged(span("gateway", "GetTask", 1, 1.1, state="TASK_STATE_WORKING")) == []
    lost = span("gateway", "GetTask", 3, 3.1, error__type="-32001")
    assert reasons(judged(CREATED, working, lost)) == [("task_lost", "gateway", "t1")]


def test_an_error_reply_that_states_a_state_is_an_observation() -> None:
    refused = span(
        "gateway", "CancelTask", 1, 1.1, state="TASK_STATE_COMPLETED", error__type="-32002"
    )
    found = judged(CREATED, refused, span("gateway", "SendMessage", 2))
    # the CancelTask itself decided on an unobserved task; the follow-up knew it ended
    assert reasons(found) == [
        ("no_observation", "gateway", "t1"),
        ("terminal_state", "gateway", "t1"),
    ]


def test_explicit_decisions_and_their_assumed_state() -> None:
    attrs = {"a2a.task.id": "t1", "otel_a2a.liveness.decision": True}
    mark = acts_of("gateway", attrs, 5, 5, kind=1)
    assert reasons(judged(mark)) == [("no_observation", "gateway", "t1")]
    done = span("gateway", "GetTask", 1, 1.1, state="TASK_STATE_COMPLETED")
    assumed_done = acts_of(
        "gateway", {**attrs, "otel_a2a.decision.assumed_state": "TASK_STATE_COMPLETED"}, 5, 5, 1
    )
    assert judged(done, assumed_done) == []
    assert reasons(judged(done, mark)) == [("terminal_state", "gateway", "t1")]


def test_only_client_spans_observe_and_decide() -> None:
    server = span("worker", "CancelTask", 5, kind=2)
    assert [a.kind for a in server] == ["seen"]
    assert judged(server) == []


def test_span_time_orders_what_arrives_out_of_order() -> None:
    poll = span("gateway", "GetTask", 1, 1.1, state="TASK_STATE_WORKING")
    cancel = span("gateway", "CancelTask", 10)
    judge = FleetJudge(hold=2.0)
    # the decision's batch arrives first, the observation's a second later: within the hold
    assert judge.feed(CREATED + cancel, now=100.0) == []
    assert judge.feed(poll, now=101.0) == []
    assert judge.tick(101.9) == []  # the decision still waits its hold
    # the decision's hold ended, but the observation before it in span time still waits its
    # own: the decision waits behind it
    assert judge.tick(102.0) == [] and judge.pending == 2
    assert judge.tick(103.0) == [] and judge.pending == 0
    assert judge.stats.judged == 1 and judge.stats.late == 0


def test_a_decision_later_than_its_hold_is_late_not_judged() -> None:
    poll = span("gateway", "GetTask", 12, 12.1, state="TASK_STATE_WORKING")
    cancel = span("gateway", "CancelTask", 10)
    judge = FleetJudge(hold=1.0)
    judge.feed(CREATED + poll, now=0.0)
    assert judge.tick(5.0) == []
    assert judge.feed(cancel, now=6.0) + judge.flush() == []
    assert judge.stats.late == 1 and judge.stats.judged == 0


def test_findings_come_in_span_time_order() -> None:
    first = span("gateway", "CancelTask", 3, task="a")
    second = span("auditor", "CancelTask", 2, task="b")
    found = judged(first, second, hold=5.0)
    assert [f.task_id for f in found] == ["b", "a"]


def test_a_service_running_otel_a2a_is_not_judged_twice() -> None:
    attrs = {"a2a.method.name": "CancelTask", "a2a.task.id": "t1", **AGENT}
    ours = span_acts("python", True, CLIENT, attrs, T0 + 5 * S, T0 + 5 * S, (), "", "")
    assert [a.kind for a in ours] == ["seen"]
    judge = FleetJudge(hold=5.0)
    # a foreign tracer's span of that service, before its first otel_a2a span came in
    foreign = acts_of("python", attrs, 6, 6)
    assert judge.feed(foreign, 0.0) == []
    assert judge.feed(ours, 1.0, self_judging=["python"]) + judge.flush() == []
    assert judge.stats.in_process == 1
    # its spans still say the task existed: another service's send follows up on it
    follow_up = span("go", "SendMessage", 7, 7.1, state="TASK_STATE_WORKING")
    assert reasons(judged(ours, follow_up)) == [("no_observation", "go", "t1")]

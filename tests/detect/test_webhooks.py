"""Whom a push delivery speaks for (``detect.webhooks``)."""

from __future__ import annotations

from otel_a2a.detect.webhooks import Outcome, Verdict, Webhooks
from otel_a2a.protocol.model import PushTarget
from otel_a2a.protocol.push import token_digest

AGENT = "http://agent.example/a2a"
TOKEN = token_digest("tk")
OTHER = token_digest("other")


def _hook(path: str = "/hook", token: bytes | None = TOKEN) -> PushTarget:
    return PushTarget(path, token)


def test_a_delivery_for_the_task_registered_with_its_token_is_observed() -> None:
    hooks = Webhooks()
    hooks.register(_hook(), AGENT, "T")
    assert hooks.expects("/hook") and not hooks.expects("/other")
    assert hooks.deliver("/hook", "T", TOKEN) == Verdict(Outcome.OBSERVED, AGENT)
    assert hooks.deliver("/hook", "T", OTHER) == Verdict(Outcome.TOKEN_MISMATCH)
    assert hooks.deliver("/hook", "T", None) == Verdict(Outcome.TOKEN_MISMATCH)
    assert hooks.deliver("/hook", "U", TOKEN) == Verdict(Outcome.UNEXPECTED_TASK)
    assert hooks.deliver("/other", "T", TOKEN) == Verdict(Outcome.UNEXPECTED_TASK)


def test_a_config_without_a_token_accepts_any() -> None:
    hooks = Webhooks()
    hooks.register(_hook(token=None), AGENT, "T")
    assert hooks.deliver("/hook", "T", None).outcome is Outcome.OBSERVED
    assert hooks.deliver("/hook", "T", OTHER).outcome is Outcome.OBSERVED


def test_a_pending_config_is_bound_by_the_reply() -> None:
    hooks = Webhooks()
    reg = hooks.register(_hook(), AGENT, None)
    assert hooks.expects("/hook")
    hooks.bind(reg, "T")
    assert reg.task_id == "T" and len(hooks) == 1
    assert hooks.deliver("/hook", "T", TOKEN).outcome is Outcome.OBSERVED
    assert hooks.deliver("/hook", "U", TOKEN).outcome is Outcome.UNEXPECTED_TASK


def test_a_push_before_the_reply_binds_the_pending_config_by_its_token() -> None:
    hooks = Webhooks()
    reg = hooks.register(_hook(), AGENT, None)
    assert hooks.deliver("/hook", "T", OTHER) == Verdict(Outcome.TOKEN_MISMATCH)
    assert reg.task_id is None
    assert hooks.deliver("/hook", "T", TOKEN) == Verdict(Outcome.OBSERVED, AGENT)
    assert reg.task_id == "T"
    hooks.bind(reg, "T")  # the reply, later: nothing more
    assert len(hooks) == 1
    # bound now: another task's push is no longer taken for it
    assert hooks.deliver("/hook", "U", TOKEN).outcome is Outcome.UNEXPECTED_TASK


def test_registrations_are_bounded_and_paths_forgotten_with_them() -> None:
    hooks = Webhooks(max_entries=2, max_pending=1)
    hooks.register(_hook("/a"), AGENT, "T1")
    hooks.register(_hook("/b"), AGENT, "T2")
    hooks.register(_hook("/b"), AGENT, "T3")  # drops the oldest, /a's
    assert not hooks.expects("/a") and hooks.expects("/b") and len(hooks) == 2
    assert hooks.deliver("/a", "T1", TOKEN).outcome is Outcome.UNEXPECTED_TASK
    first = hooks.register(_hook("/p"), AGENT, None)
    hooks.register(_hook("/q"), AGENT, None)  # drops the older pending one
    assert not hooks.expects("/p") and hooks.expects("/q")
    hooks.bind(first, "T9")  # dropped: binds nothing
    assert hooks.deliver("/p", "T9", TOKEN).outcome is Outcome.UNEXPECTED_TASK


def test_a_config_registered_again_for_a_task_replaces_the_first() -> None:
    hooks = Webhooks()
    hooks.register(_hook(), AGENT, "T")
    hooks.register(_hook(token=OTHER), "http://other.example", "T")
    assert len(hooks) == 1
    assert hooks.deliver("/hook", "T", OTHER) == Verdict(Outcome.OBSERVED, "http://other.example")
    assert hooks.deliver("/hook", "T", TOKEN).outcome is Outcome.TOKEN_MISMATCH

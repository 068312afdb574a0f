"""Runtime bookkeeping: the URL -> agent memo and the agent labels of the metrics."""

from __future__ import annotations

import pytest

from otel_a2a.instrumentation import runtime
from otel_a2a.semconv import OTHER
from tests.detect.helpers import make_card
from tests.instrumentation.conftest import Harness


def _runtime() -> runtime.Runtime:
    rt = runtime.current()
    assert rt is not None
    return rt


def test_a_card_arriving_during_a_lookup_is_not_memoised_away(
    otel: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup answers from before the card; that answer must not outlive the card."""
    rt = _runtime()
    registry = rt.detector.registry
    url, interface = "http://gw.test/agents/w/tasks/1", "http://gw.test/agents/w"
    real = registry.agent_for_url

    def racing(request_url: str) -> str:
        answer = real(request_url)  # before the card: the gateway's origin
        registry.update("http://w.test", make_card(interfaces=(interface,)))
        rt.cards_changed()  # what a card fetch on another thread does
        return answer

    monkeypatch.setattr(registry, "agent_for_url", racing)
    assert rt.agent_for_url(url, interface) == "http://gw.test"
    monkeypatch.setattr(registry, "agent_for_url", real)
    assert rt.agent_for_url(url, interface) == "http://w.test"


def test_hosts_without_cards_cannot_take_every_label(otel: Harness) -> None:
    rt = _runtime()
    hosts = [rt.metrics.agent(f"http://host{i}.test") for i in range(120)]
    assert hosts.count(OTHER) == 70  # 50 addresses at most
    rt.detector.registry.update("http://worker.test", make_card(name="worker"))
    assert rt.metrics.agent("http://worker.test") == "worker"

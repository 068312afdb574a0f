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
        card = make_card(interfaces=(interface,))
        rt.card_fetched("http://w.test/.well-known/agent-card.json", card, None)  # a thread's
        return answer

    monkeypatch.setattr(registry, "agent_for_url", racing)
    assert rt.peer(url, interface).key == "http://gw.test"
    monkeypatch.setattr(registry, "agent_for_url", real)
    assert rt.peer(url, interface).key == "http://w.test"


def test_a_peer_resolved_before_a_card_fetch_is_resolved_again(otel: Harness) -> None:
    """A long exchange (a stream) observes under the card in force, not the one it began under;
    without a card fetch it keeps the peer it has (no registry lookups)."""
    rt = _runtime()
    card_url = "http://w.test/.well-known/agent-card.json"
    rt.card_fetched(card_url, make_card('"v1"', name="w"), None)
    before = rt.peer("http://w.test/a2a")
    assert (before.etag, before.name, before.label) == ('"v1"', "w", "w")
    assert rt.fresh(before) is before
    rt.card_fetched(card_url, make_card('"v2"', name="w2", heartbeat=5.0), None)
    after = rt.fresh(before)
    assert (after.key, after.etag, after.heartbeat, after.name) == (
        "http://w.test",
        '"v2"',
        5.0,
        "w2",
    )
    assert rt.peer("http://w.test/a2a").etag == '"v2"'
    assert otel.total("otel_a2a.card.etag.changes", otel_a2a__agent__name="w2") == 1


def test_hosts_without_cards_cannot_take_every_label(otel: Harness) -> None:
    rt = _runtime()
    hosts = [rt.metrics.agent(f"http://host{i}.test") for i in range(120)]
    assert hosts.count(OTHER) == 70  # 50 addresses at most
    rt.detector.registry.update("http://worker.test", make_card(name="worker"))
    assert rt.metrics.agent("http://worker.test") == "worker"

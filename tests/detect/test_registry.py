"""CardRegistry: agent identity, etag tracking, heartbeat resolution, bounds."""

from __future__ import annotations

import math
import threading

import pytest

from otel_a2a.detect.registry import CardRegistry
from otel_a2a.protocol.urls import INVALID_URL

from .helpers import make_card


def test_agent_for_url_longest_interface_prefix_else_origin() -> None:
    reg = CardRegistry()
    reg.update(
        "http://gw:8080",
        make_card(interfaces=("http://gw:8080/a2a/worker", "http://gw:8080/a2a/worker/v2/")),
    )
    reg.update("http://other:1", make_card(interfaces=("http://GW:8080/a2a",)))
    assert reg.agent_for_url("http://gw:8080/a2a/worker/v2/tasks/1") == "http://gw:8080"
    assert reg.agent_for_url("http://gw:8080/a2a/worker") == "http://gw:8080"
    assert reg.agent_for_url("http://gw:8080/a2a/worker-2/tasks") == "http://other:1"
    assert reg.agent_for_url("http://gw:8080/a2a") == "http://other:1"
    assert reg.agent_for_url("http://u:p@gw:8080/elsewhere?q=1") == "http://gw:8080"
    assert reg.agent_for_url("http://unknown:7/x") == "http://unknown:7"
    assert reg.agent_for_url("http://u:p@gw:99999/a2a/worker") == INVALID_URL


def test_an_unreadable_card_url_is_one_invalid_agent() -> None:
    assert CardRegistry.agent_key("http://u:p@[::1/.well-known/agent-card.json") == INVALID_URL
    card_url = "http://U:p@GW/a/.well-known/agent-card.json?k=1"
    assert CardRegistry.agent_key(card_url) == "http://gw/a"


def test_interfaces_move_when_the_card_changes() -> None:
    reg = CardRegistry()
    reg.update("http://a", make_card(interfaces=("http://gw/a",)))
    assert reg.agent_for_url("http://gw/a/tasks") == "http://a"
    reg.update("http://a", make_card('"v2"', interfaces=("http://gw/b",)))
    assert reg.agent_for_url("http://gw/a/tasks") == "http://gw"
    assert reg.agent_for_url("http://gw/b/tasks") == "http://a"


def test_many_agents_behind_one_origin() -> None:
    """A gateway serving hundreds of agents: each request finds its own (longest prefix), and
    a card claiming another agent's interface takes it without the first agent's later
    eviction taking it back."""
    reg = CardRegistry(max_agents=600)
    for i in range(500):
        reg.update(f"http://agent{i}", make_card(interfaces=(f"http://gw/agents/{i}",)))
    reg.update("http://root", make_card(interfaces=("http://gw/agents",)))
    assert reg.agent_for_url("http://gw/agents/7/tasks/1") == "http://agent7"
    assert reg.agent_for_url("http://gw/agents/7:subscribe") == "http://agent7"
    assert reg.agent_for_url("http://gw/agents/77") == "http://agent77"
    assert reg.agent_for_url("http://gw/agents/500/tasks") == "http://root"
    assert reg.agent_for_url("http://gw/agent") == "http://gw"
    reg.update("http://thief", make_card(interfaces=("http://gw/agents/3",)))
    assert reg.agent_for_url("http://gw/agents/3") == "http://thief"
    small = CardRegistry(max_agents=2)
    small.update("http://a", make_card(interfaces=("http://gw/x",)))
    small.update("http://b", make_card(interfaces=("http://gw/x",)))  # claims it
    small.update("http://c", make_card())  # evicts a, whose claim is gone already
    assert small.agent_for_url("http://gw/x/tasks") == "http://b"


def test_etag_change_is_reported_only_against_a_known_previous_etag() -> None:
    reg = CardRegistry()
    assert reg.update("http://a", make_card('"v1"')) is False
    assert reg.update("http://a", make_card('"v1"')) is False
    reg.touch_304("http://a")
    assert reg.etag("http://a") == '"v1"'
    assert reg.update("http://a", make_card('"v2"')) is True
    assert reg.etag("http://a") == '"v2"'
    assert reg.update("http://a", make_card('"v2"')) is False
    assert reg.etag("http://nobody") is None and reg.name("http://nobody") is None
    assert reg.name("http://a") == "worker"
    reg.touch_304("http://nobody")  # unknown agent: nothing to keep, nothing raised


def test_heartbeat_first_match_wins() -> None:
    reg = CardRegistry(
        default_heartbeat=45.0,
        heartbeat_overrides={"over:9001": 5.0, "hostonly": 7.0, "GW:8080": 9.0},
    )
    ext = make_card(heartbeat=12.0, heartbeat_source="extension")
    reg.update("http://over:9001", ext)
    assert reg.heartbeat("http://over:9001") == (5.0, "override")
    reg.update("http://hostonly:1234", ext)
    assert reg.heartbeat("http://hostonly:1234") == (7.0, "override")
    reg.update("http://card:1", ext)
    assert reg.heartbeat("http://card:1") == (12.0, "extension")
    reg.update("http://field:1", make_card(heartbeat=3.0, heartbeat_source="card-field"))
    assert reg.heartbeat("http://field:1") == (3.0, "card-field")
    reg.update("http://plain:1", make_card())
    assert reg.heartbeat("http://plain:1") == (45.0, "default")
    assert reg.heartbeat("http://never-seen:2") == (45.0, "default")
    assert reg.heartbeat("http://over:9001/ignored") == (5.0, "override")
    reg.update("http://behind-gw:1", make_card(interfaces=("http://gw:8080/x",)))
    assert reg.heartbeat("http://behind-gw:1") == (9.0, "override")
    # a changed card re-resolves
    reg.update("http://plain:1", make_card('"v2"', heartbeat=2.0, heartbeat_source="extension"))
    assert reg.heartbeat("http://plain:1") == (2.0, "extension")


@pytest.mark.parametrize(
    ("key", "url", "matches"),
    [
        ("agent.test:443", "https://agent.test", True),  # the default port written out
        ("agent.test:443", "https://agent.test:443/a2a", True),
        ("agent.test:80", "http://agent.test", True),
        ("agent.test:443", "http://agent.test", False),  # port 80, not 443
        ("agent.test", "https://agent.test:8443", True),  # a bare host names every port
        ("agent.test:8443", "https://agent.test", False),
        ("[::1]:8080", "http://[::1]:8080/x", True),
        ("[::1]", "http://[::1]:8080/x", True),
        ("[::1]:80", "http://[::1]/x", True),
    ],
)
def test_override_keys_with_and_without_ports(key: str, url: str, matches: bool) -> None:
    reg = CardRegistry(default_heartbeat=45.0, heartbeat_overrides={key: 5.0})
    assert reg.heartbeat(url) == ((5.0, "override") if matches else (45.0, "default"))


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_heartbeat_values_fall_back(bad: float) -> None:
    reg = CardRegistry(default_heartbeat=bad, heartbeat_overrides={"a": bad})
    reg.update("http://a", make_card(heartbeat=bad, heartbeat_source="extension"))
    assert reg.heartbeat("http://a") == (30.0, "default")


def test_bounded_and_forgets_routes_of_evicted_agents() -> None:
    reg = CardRegistry(max_agents=2)
    reg.update("http://a", make_card(interfaces=("http://gw/a",)))
    reg.update("http://b", make_card())
    reg.update("http://c", make_card())
    assert len(reg) == 2 and reg.etag("http://a") is None
    assert reg.agent_for_url("http://gw/a/tasks") == "http://gw"
    assert reg.etag("http://b") is not None and reg.etag("http://c") is not None


@pytest.mark.parametrize(
    "url", ["", "::::", "http://", "http://[::1", "\x00", "http://h:99999/", "ftp://x/y", "//x"]
)
def test_weird_urls_do_not_raise(url: str) -> None:
    reg = CardRegistry()
    reg.update(url, make_card(interfaces=(url, "http://ok/x")))
    assert isinstance(reg.agent_for_url(url), str)
    reg.heartbeat(url)
    reg.agent_key(url)


def test_threads_smoke() -> None:
    reg = CardRegistry(max_agents=5)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(2_000):
                agent = f"http://a{(i + n) % 9}"
                reg.update(agent, make_card(f'"{i % 3}"', interfaces=(f"{agent}/x",)))
                reg.agent_for_url(f"{agent}/x/tasks")
                reg.heartbeat(agent)
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(reg) <= 5


def test_two_agents_on_one_origin_are_two_agents() -> None:
    """A gateway serving agents under base paths: each card is its own agent and etag."""
    reg = CardRegistry()
    key_a = CardRegistry.agent_key("http://gw/agents/a/.well-known/agent-card.json")
    key_b = CardRegistry.agent_key("http://gw/agents/b/.well-known/agent.json")
    assert (key_a, key_b) == ("http://gw/agents/a", "http://gw/agents/b")
    assert CardRegistry.agent_key("http://gw:80/.well-known/agent-card.json") == "http://gw"
    assert reg.update(key_a, make_card('"a1"')) is False
    assert reg.update(key_b, make_card('"b1"')) is False  # not a change of a's card
    assert reg.update(key_a, make_card('"a1"')) is False
    # what is under a card's base path belongs to its agent, declared interfaces or not
    assert reg.agent_for_url("http://gw/agents/a/tasks/1") == key_a
    assert reg.agent_for_url("http://gw/agents/b:subscribe") == key_b
    assert reg.agent_for_url("http://gw/agents/c/tasks/1") == "http://gw"


def test_a_card_update_never_unroutes_a_prefix_it_keeps() -> None:
    """Routes are read without the lock: a re-fetched card sets its routes before dropping the
    ones it no longer declares, so a request routed meanwhile never falls back to the bare
    origin (no card, no etag: an etag change on its task would go unreported)."""
    deleted: list[str] = []

    class Watched(dict[str, str]):
        def __delitem__(self, key: str) -> None:
            deleted.append(key)
            super().__delitem__(key)

    reg = CardRegistry()
    agent = "http://gw.test/agents/a"
    rpc, rest = f"{agent}/rpc", f"{agent}/rest"
    reg.update(agent, make_card('"v1"', interfaces=(rpc, rest)))
    reg._routes["http://gw.test"] = Watched(reg._routes["http://gw.test"])
    reg.update(agent, make_card('"v2"', interfaces=(rpc, rest)))
    assert deleted == []
    reg.update(agent, make_card('"v3"', interfaces=(rpc,)))
    assert deleted == ["/agents/a/rest"]
    assert reg.agent_for_url(f"{rpc}/x") == agent
    assert reg.agent_for_url(f"{rest}/x") == agent  # under the agent's base path all the same


def test_card_variants_by_version_are_compared_with_their_own_kind() -> None:
    """A server serving one card per ``A2A-Version`` (each with its own ETag): alternating
    fetches are no change, and the etag in force stays put."""
    reg, agent = CardRegistry(), "http://a"
    assert reg.update(agent, make_card('"v03-1"'), None) is False
    assert reg.update(agent, make_card('"v10-1"'), "1.0") is False  # a new variant
    for _ in range(3):
        assert reg.update(agent, make_card('"v03-1"'), None) is False
        assert reg.update(agent, make_card('"v10-1"'), "1.0") is False
    assert reg.etag(agent) == '"v03-1"'


def test_one_redeploy_seen_through_every_variant_is_one_change() -> None:
    reg, agent = CardRegistry(), "http://a"
    reg.update(agent, make_card('"v03-1"'), None)
    reg.update(agent, make_card('"v10-1"'), "1.0")
    assert reg.update(agent, make_card('"v10-2"'), "1.0") is True  # the redeploy shows
    assert reg.etag(agent) == '"v10-2"'
    assert reg.update(agent, make_card('"v03-2"'), None) is False  # the same redeploy
    assert reg.etag(agent) == '"v10-2"'  # observations made under it stay valid
    # a later redeploy, first seen through the other variant, is a change again
    assert reg.update(agent, make_card('"v03-3"'), None) is True
    assert reg.etag(agent) == '"v03-3"'
    assert reg.update(agent, make_card('"v10-3"'), "1.0") is False
    # the same variant changing twice is two changes
    assert reg.update(agent, make_card('"v10-4"'), "1.0") is True
    assert reg.update(agent, make_card('"v10-5"'), "1.0") is True


def test_a_client_fetching_one_way_sees_every_change() -> None:
    reg, agent = CardRegistry(), "http://a"
    assert [reg.update(agent, make_card(f'"v{i % 2}"'), "1.0") for i in range(4)] == [
        False,
        True,
        True,
        True,
    ]


def test_variants_are_bounded() -> None:
    """What a client asks cards for is a handful of versions; a bound all the same."""
    reg, agent = CardRegistry(), "http://a"
    for i in range(100):
        reg.update(agent, make_card('"same"'), f"{i}.0")
    assert len(reg._agents[agent].variants) == 8  # the 8 most recently fetched
    assert reg.update(agent, make_card('"other"'), "0.0") is False  # forgotten: new again
    assert reg.update(agent, make_card('"again"'), "0.0") is True  # and tracked since
    assert reg.variant_etag(agent, "0.0") == '"again"'


def test_an_etag_back_within_its_max_age_is_no_change() -> None:
    """A server alternating per-caller cards on something the request does not show: the
    first new etag is a change (nothing tells it from a redeploy), its return within the
    max-age it was served with is not; after that max-age it is a change again."""
    reg, agent = CardRegistry(), "http://a"
    cached = make_card('"a"')._replace(max_age=60.0)
    other = make_card('"b"')._replace(max_age=60.0)
    assert reg.update(agent, cached, None, now=0.0) is False
    assert reg.update(agent, other, None, now=1.0) is True
    assert reg.update(agent, cached, None, now=2.0) is False  # back: a variant
    assert reg.update(agent, other, None, now=3.0) is False
    assert reg.etag(agent) == '"b"'  # the etag in force did not move with the variants
    assert reg.update(agent, cached, None, now=100.0) is True  # seen 98 s ago, max-age 60
    # without a max-age (or a clock) nothing is remembered: every return is a change
    plain = CardRegistry()
    assert [plain.update(agent, make_card(f'"v{i % 2}"'), None, now=i) for i in range(3)] == [
        False,
        True,
        True,
    ]


def test_cards_per_caller_are_variants_of_their_own() -> None:
    """``card_variant`` tells callers apart by a digest of their credentials, never the
    credentials themselves; a fetch without any keeps the version alone."""
    from otel_a2a.protocol.classify import card_variant

    alice = card_variant({"authorization": "Bearer alice"}, "1.0")
    bob = card_variant({"authorization": "Bearer bob"}, "1.0")
    assert alice is not None and bob is not None and alice != bob
    assert alice.startswith("1.0#") and "alice" not in alice
    assert card_variant({"authorization": "Bearer alice"}, "1.0") == alice
    assert card_variant({}, "1.0") == "1.0" and card_variant({}, None) is None
    reg, agent = CardRegistry(), "http://a"
    assert reg.update(agent, make_card('"for-alice"'), alice) is False
    assert reg.update(agent, make_card('"for-bob"'), bob) is False
    assert reg.etag(agent) == '"for-alice"'

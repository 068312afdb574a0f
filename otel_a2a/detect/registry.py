"""What this process knows about each agent's card: etag in force, heartbeat, identity.

The invariant compares a task's observation etag with the *current* card etag of its agent
and ages it against the agent's heartbeat, so both must be resolved per agent, cheaply, from
any thread, with a bound on how many agents are remembered (a crawler talking to many hosts
must not grow memory without limit).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from otel_a2a.locks import fork_safe
from otel_a2a.protocol.card import valid_seconds
from otel_a2a.protocol.classify import CARD_SUFFIXES
from otel_a2a.protocol.grpc import channel_origin
from otel_a2a.protocol.model import CardInfo
from otel_a2a.protocol.urls import DEFAULT_PORTS, INVALID_URL, split_url

DEFAULT_HEARTBEAT = 30.0


def _grpc(binding: object) -> bool:
    return isinstance(binding, str) and binding.upper() == "GRPC"


def _path_prefix(path: str) -> str:
    return path.rstrip("/")


def _prefixes(path: str) -> Iterator[str]:
    """The segment-wise prefixes of ``path``, longest first: ``/a2a/w`` owns ``/a2a/w``,
    ``/a2a/w/tasks/1`` and ``/a2a/w:subscribe`` but not ``/a2a/w2``; ``""`` owns everything.
    Looking these up costs the path's depth, however many agents share the origin."""
    path = path.rstrip("/")
    yield path
    for i in range(len(path) - 1, -1, -1):
        if path[i] in "/:":
            yield path[:i]


def _override_keys(url: str) -> list[str]:
    """The ``OTEL_A2A_HEARTBEAT_OVERRIDES`` keys that name ``url``'s host, most specific first:
    ``host:port`` (a default port written out too: ``agent.test:443`` names
    ``https://agent.test``), then ``host``."""
    split = split_url(url)
    if split is None:
        return []
    origin_url, hostport, _path = split
    if ":" in hostport.rsplit("]", 1)[-1]:  # an explicit, non-default port
        return [hostport, hostport.rsplit(":", 1)[0]]
    port = DEFAULT_PORTS.get(origin_url.split("://", 1)[0])
    return [f"{hostport}:{port}", hostport] if port is not None else [hostport]


def _heartbeat_override(overrides: Mapping[str, float], urls: list[str]) -> float | None:
    for url in urls:
        for key in _override_keys(url):
            seconds = overrides.get(key)
            if seconds is not None:
                return seconds
    return None


@dataclass(slots=True)
class _Agent:
    card: CardInfo | None = None
    etag: str | None = None  # the etag in force
    heartbeat: tuple[float, str] | None = None  # resolved whenever a card is recorded
    prefixes: tuple[tuple[str, str], ...] = ()  # (origin, path prefix) this agent owns
    # per card variant (the A2A-Version asked for): its last etag, and the generation it saw
    variants: dict[str | None, tuple[str | None, int]] = field(default_factory=dict)
    generation: int = 0  # how many etag changes this agent went through
    # etag -> (when last fetched, the max-age it came with): an etag back within its max-age
    # is a per-caller variant of the card in force, not a redeploy
    recent: dict[str, tuple[float, float]] = field(default_factory=dict)


_MAX_VARIANTS = 8  # versions and callers a client asks cards for: a handful
_MAX_RECENT = 16  # etags remembered per agent for the return rule


def _returned(recent: dict[str, tuple[float, float]], etag: str, now: float | None) -> bool:
    seen = recent.get(etag)
    return seen is not None and now is not None and now - seen[0] <= seen[1]


def _remember(
    recent: dict[str, tuple[float, float]], etag: str, now: float, max_age: float
) -> None:
    recent.pop(etag, None)  # re-inserted last: the oldest first out
    if len(recent) >= _MAX_RECENT:
        del recent[next(iter(recent))]
    recent[etag] = (now, max_age)


class CardRegistry:
    """Per agent key (card URL origin): the etag in force, the card, the heartbeat.

    ``heartbeat_overrides`` maps ``host[:port]`` to seconds (``OTEL_A2A_HEARTBEAT_OVERRIDES``);
    ``default_heartbeat`` is ``OTEL_A2A_DEFAULT_HEARTBEAT``. Remembers at most ``max_agents``
    agents, forgetting the least recently updated one.
    """

    def __init__(
        self,
        max_agents: int = 1000,
        *,
        default_heartbeat: float = DEFAULT_HEARTBEAT,
        heartbeat_overrides: Mapping[str, float] | None = None,
    ) -> None:
        self.max_agents = max(1, max_agents)
        self.default_heartbeat = valid_seconds(default_heartbeat) or DEFAULT_HEARTBEAT
        self._overrides: dict[str, float] = {}
        for key, value in (heartbeat_overrides or {}).items():
            seconds = valid_seconds(value)
            if isinstance(key, str) and seconds is not None:
                self._overrides[key.strip().lower()] = seconds
        self._lock = threading.Lock()
        fork_safe(self, "_lock")
        self._agents: OrderedDict[str, _Agent] = OrderedDict()
        # origin -> {path prefix: agent}; read without the lock (single dict reads)
        self._routes: dict[str, dict[str, str]] = {}

    # -- identity -------------------------------------------------------------------------------

    @staticmethod
    def agent_key(card_url: str) -> str:
        """The agent key of a card fetched from ``card_url``: its origin, plus the base path
        before the well-known card path when there is one (``http://gw/agents/a`` for
        ``http://gw/agents/a/.well-known/agent-card.json``): a gateway serving several agents
        on one origin serves several cards, and each is its own agent with its own etag."""
        split = split_url(card_url)
        if split is None:
            return INVALID_URL
        card_origin, _hostport, path = split
        for suffix in CARD_SUFFIXES:
            if path.endswith(suffix):
                return card_origin + path[: -len(suffix)].rstrip("/")
        return card_origin

    def agent_for_url(self, url: str) -> str:
        """The agent a request URL belongs to (agent identity).

        The agent whose declared interface URL is the longest (segment-wise) prefix of
        ``url``, else the request's origin.
        """
        split = split_url(url)
        if split is None:
            return INVALID_URL  # never what it was given: it may hold a password
        req_origin, _hostport, path = split
        routes = self._routes.get(req_origin)
        if routes:
            for prefix in _prefixes(path):
                agent = routes.get(prefix)
                if agent is not None:
                    return agent
        return req_origin

    # -- cards ----------------------------------------------------------------------------------

    def update(
        self, agent: str, card: CardInfo, variant: str | None = None, now: float | None = None
    ) -> bool:
        """Record a fetched card; True when its etag differs from a previously known one.

        ``variant`` is which card the fetch asked for (``A2ARequest.card_variant``: the
        ``A2A-Version``, and the caller's credentials as a digest). A server may serve one
        card per version (@a2a-js/sdk in compatibility mode, ``Vary: A2A-Version``) or per
        caller (a2a-sdk's ``card_modifier``), each with its own ETag: a card is compared with
        the last one of its own variant only, and a variant seen for the first time is no
        change. An etag that comes back within the max-age it was served with (``now``, a
        monotonic time, given) is no change either: the server alternates per-caller cards
        on something the request does not show. One redeploy changes every variant: the
        first to show it reports the change (a new generation, its etag in force); the
        others, fetched later, catch up silently.
        """
        with self._lock:
            entry = self._agents.get(agent)
            if entry is None:
                entry = self._new(agent)
            else:
                self._agents.move_to_end(agent)
            known = entry.variants.get(variant)
            changed = False
            if not entry.variants:
                entry.etag = card.etag  # the first card of this agent
            elif (
                known is not None
                and known[0] != card.etag
                and known[1] == entry.generation
                and not _returned(entry.recent, card.etag, now)
            ):
                changed = known[0] is not None
                entry.generation += 1
                entry.etag = card.etag
            variants = entry.variants
            if known is not None:
                del variants[variant]  # re-inserted last: least recently fetched first
            elif len(variants) >= _MAX_VARIANTS:
                del variants[next(iter(variants))]
            variants[variant] = (card.etag, entry.generation)
            if now is not None and card.max_age:
                _remember(entry.recent, card.etag, now, card.max_age)
            entry.card = card
            self._set_routes(agent, entry, card)
            # resolved here, under the lock: a lazy cache could store the previous card's value
            entry.heartbeat = self._resolve_heartbeat(agent, entry)
            return changed

    def touch_304(self, agent: str) -> None:
        """A ``304 Not Modified`` card response: the etag stays, the agent is fresh."""
        with self._lock:
            if agent in self._agents:
                self._agents.move_to_end(agent)

    def _new(self, agent: str) -> _Agent:
        while len(self._agents) >= self.max_agents:
            old_key, old = self._agents.popitem(last=False)
            self._drop_routes(old_key, old)
        entry = _Agent()
        self._agents[agent] = entry
        return entry

    def _drop_routes(
        self, agent: str, entry: _Agent, keep: tuple[tuple[str, str], ...] = ()
    ) -> None:
        for route_origin, prefix in entry.prefixes:
            routes = self._routes.get(route_origin)
            if (route_origin, prefix) in keep or routes is None or routes.get(prefix) != agent:
                continue  # still ours, or another agent's card claimed it since
            del routes[prefix]
            if not routes:
                del self._routes[route_origin]
        entry.prefixes = keep

    def _set_routes(self, agent: str, entry: _Agent, card: CardInfo) -> None:
        """The new card's routes first, then the old ones it no longer declares: a request
        routed meanwhile (reads take no lock) never finds its agent's prefix missing."""
        owned: list[tuple[str, str]] = []
        split = split_url(agent)
        if split is not None and split[2]:  # served under a base path: what is under it is ours
            owned.append((split[0], _path_prefix(split[2])))
        for iface in card.interfaces:
            url = channel_origin(iface.url) if _grpc(iface.binding) else iface.url
            split = split_url(url) if isinstance(url, str) else None
            if split is None:
                continue
            key = (split[0], _path_prefix(split[2]))
            if key not in owned:
                owned.append(key)
        for route_origin, prefix in owned:
            self._routes.setdefault(route_origin, {})[prefix] = agent  # the latest card wins
        self._drop_routes(agent, entry, keep=tuple(owned))

    # -- queries --------------------------------------------------------------------------------

    def etag(self, agent: str) -> str | None:
        entry = self._agents.get(agent)
        return entry.etag if entry is not None else None

    def variant_etag(self, agent: str, variant: str | None) -> str | None:
        """The etag of the card last fetched as ``variant``, else the etag in force."""
        entry = self._agents.get(agent)
        if entry is None:
            return None
        known = entry.variants.get(variant)
        return known[0] if known is not None else entry.etag

    def card(self, agent: str) -> CardInfo | None:
        entry = self._agents.get(agent)
        return entry.card if entry is not None else None

    def name(self, agent: str) -> str | None:
        entry = self._agents.get(agent)
        return entry.card.name if entry is not None and entry.card is not None else None

    def heartbeat(self, agent: str) -> tuple[float, str]:
        """(seconds, source) for the agent, first match wins.

        ``override`` (``host[:port]`` of the agent key or of an interface it declares),
        ``extension`` / ``card-field`` (from its card), ``default``.
        """
        entry = self._agents.get(agent)
        if entry is not None and entry.heartbeat is not None:
            return entry.heartbeat
        return self._resolve_heartbeat(agent, None)  # no card: overrides, else the default

    def _resolve_heartbeat(self, agent: str, entry: _Agent | None) -> tuple[float, str]:
        card = entry.card if entry is not None else None
        if self._overrides:
            urls = [agent]
            if card is not None:
                urls += (i.url for i in card.interfaces if isinstance(i.url, str))
            seconds = _heartbeat_override(self._overrides, urls)
            if seconds is not None:
                return seconds, "override"
        if card is not None:
            seconds = valid_seconds(card.heartbeat)
            if seconds is not None:
                source = card.heartbeat_source
                return seconds, source if source in ("extension", "card-field") else "card-field"
        return self.default_heartbeat, "default"

    def __len__(self) -> int:
        return len(self._agents)

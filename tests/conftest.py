"""Shared pytest fixtures: real A2A peers (a2a-sdk under Python, @a2a-js/sdk under Node, a2a-go
under Go, the A2A Java SDK under the JVM)."""

from __future__ import annotations

from collections.abc import Iterator

# a2a-sdk 1.3 imports its client factory's optional v0.3 gRPC transport in a try/except:
# imported first through the server's v0.3 gRPC handler (the worker-side tests do), the
# circular import fails there, the factory keeps None and sends every v0.3 gRPC call through
# the v1.0 transport. The client first, as an application that is a client imports it.
import a2a.client.client_factory  # noqa: F401  (before anything imports a2a's server side)
import pytest
from hypothesis import settings

from tests.support import in_ci
from tests.support.peers import RunningPeer, Runtime, problem, start_peer

# Property tests assert properties, not speed: Hypothesis's default 200 ms deadline per
# example is a wall-clock assert that a loaded 2-core CI machine can fail.
settings.register_profile("otel-a2a", deadline=None)
settings.load_profile("otel-a2a")

# What the version matrix (``.ci/matrix``) leaves out: a test that needs a real A2A peer
# (a fixture below) or a tool of its own (a runtime marker) is marked ``peer``.
_PEER_MARKERS = ("node", "go", "jvm", "prometheus")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if any(name.endswith(("peer", "_peer_process")) for name in fixtures) or any(
            item.get_closest_marker(marker) for marker in _PEER_MARKERS
        ):
            item.add_marker(pytest.mark.peer)


def _serve(runtime: Runtime, label: str, *options: str) -> Iterator[RunningPeer]:
    """Run ``runtime``'s peer for a session fixture. A peer that cannot run here fails the
    fixture when ``CI=true`` (nothing that must run may be skipped there) and skips it with
    the reason otherwise. With ``--grpc`` the peer must also declare its gRPC target."""
    reason = problem(runtime)
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the {label} A2A peer cannot run: {reason}", pytrace=False)
        pytest.skip(f"{label} A2A peer unavailable: {reason}")
    peer = start_peer(runtime, options=options)
    try:
        assert "--grpc" not in options or peer.grpc_target is not None
        yield peer
    finally:
        peer.stop()


@pytest.fixture(scope="session")
def python_peer_process() -> Iterator[RunningPeer]:
    """The a2a-sdk 1.3 peer (``tests/peers/python_peer.py``), one per test session."""
    peer = start_peer("python")
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture(scope="session")
def grpc_peer() -> Iterator[RunningPeer]:
    """The same a2a-sdk 1.3 peer serving gRPC too (``--grpc``: v1.0 ``GrpcHandler`` and the
    v0.3 compat handler on ``grpc_target``, declared in its card), one per test session."""
    yield from _serve("python", "Python", "--grpc")


@pytest.fixture(scope="session")
def python_peer(python_peer_process: RunningPeer) -> str:
    """Base URL (``http://127.0.0.1:<port>``) of the session's a2a-sdk 1.3 peer."""
    return python_peer_process.base_url


@pytest.fixture(scope="session")
def node_peer_process() -> Iterator[RunningPeer]:
    """The @a2a-js/sdk 1.3.0 peer (``demo/node/echo_peer.mjs``), one per session.

    Without node or ``node_modules`` the fixture fails when ``CI=true`` (nothing that must run
    may be skipped there) and skips with the reason otherwise.
    """
    yield from _serve("node", "Node")


@pytest.fixture(scope="session")
def node_peer(node_peer_process: RunningPeer) -> str:
    """Base URL (``http://127.0.0.1:<port>``) of the session's @a2a-js/sdk 1.3.0 peer."""
    return node_peer_process.base_url


@pytest.fixture(scope="session")
def go_peer_process() -> Iterator[RunningPeer]:
    """The a2a-go v2 peer (``demo/go/gateway`` in its ``--serve`` mode), one per session.

    Without its binary the fixture fails when ``CI=true`` and skips with the reason otherwise.
    """
    yield from _serve("go", "Go")


@pytest.fixture(scope="session")
def go_grpc_peer() -> Iterator[RunningPeer]:
    """The a2a-go v2 peer serving gRPC too (``--grpc``: a2a-go's ``a2agrpc`` v1.0 and v0.3
    services on ``grpc_target``, declared in its card), one per session; without its binary
    it fails under ``CI=true`` and skips otherwise."""
    yield from _serve("go", "Go", "--grpc")


@pytest.fixture(scope="session")
def jvm_peer_process() -> Iterator[RunningPeer]:
    """The A2A Java SDK peer (the demo's JVM worker jar with ``--agent behave``), one per
    session; without java or the jar it fails under ``CI=true`` and skips otherwise."""
    yield from _serve("jvm", "JVM")


@pytest.fixture(scope="session")
def go_peer(go_peer_process: RunningPeer) -> str:
    """Base URL (``http://127.0.0.1:<port>``) of the session's a2a-go v2 peer."""
    return go_peer_process.base_url


@pytest.fixture(scope="session")
def jvm_peer(jvm_peer_process: RunningPeer) -> str:
    """Base URL (``http://127.0.0.1:<port>``) of the session's A2A Java SDK peer."""
    return jvm_peer_process.base_url

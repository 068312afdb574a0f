"""Exit and noise of the providers otel-a2a configures: real OTLP gRPC exporters, no collector.

Each exporter points at a loopback port nobody listens on, so its first attempt fails at once
with ``UNAVAILABLE`` and it enters its retry schedule (about 1, 2, 4 s). A probe filter put in
front of the exporters' logger sees every record before any filter drops it: the tests wait
on its events, never on the clock.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider

from otel_a2a.instrumentation import providers
from tests.instrumentation.conftest import Harness

GRPC_LOGGER = "opentelemetry.exporter.otlp.proto.grpc.exporter"
DEADLINE = 30.0  # hang guard of every wait; each event comes within milliseconds


def closed_port() -> int:
    """A loopback port that was free a moment ago and that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class Probe(logging.Filter):
    """Sees the exporters' records first, in order; tests wait for the next one they expect."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self._next = 0  # index of the first message no wait has consumed
        self._arrived = threading.Condition()

    def filter(self, record: logging.LogRecord) -> bool:
        with self._arrived:
            self.seen.append(record.getMessage())
            self._arrived.notify_all()
        return True

    def wait(self, prefix: str) -> None:
        """Until a message starting with ``prefix`` comes after those waited for so far."""

        def found() -> bool:
            for i in range(self._next, len(self.seen)):
                if self.seen[i].startswith(prefix):
                    self._next = i + 1
                    return True
            return False

        with self._arrived:
            assert self._arrived.wait_for(found, DEADLINE), (prefix, self.seen)


@pytest.fixture
def probe() -> Iterator[Probe]:
    logger = logging.getLogger(GRPC_LOGGER)
    probe = Probe()
    logger.filters.insert(0, probe)  # before the SDK's and otel-a2a's filters
    providers._one_retry_warning_per_endpoint()
    try:
        yield probe
    finally:
        for name in providers._exporter_loggers():
            logging.getLogger(name).removeFilter(providers._retry_filter)
        logger.removeFilter(probe)
        providers._retry_filter._warned.clear()


def _export_then_shut_down(exporter: OTLPSpanExporter, probe: Probe) -> None:
    """One export that fails and waits to retry, ended by the exporter's shutdown."""
    span = TracerProvider().get_tracer("t").start_span("s")
    span.end()
    worker = threading.Thread(target=exporter.export, args=([span],), daemon=True)
    worker.start()
    probe.wait("Transient error")  # the export failed and waits to retry
    exporter.shutdown()
    worker.join(DEADLINE)
    assert not worker.is_alive()
    probe.wait("Shutdown in progress, aborting retry.")


def test_one_retry_warning_per_unreachable_endpoint_and_the_rest_counted(
    otel: Harness, probe: Probe, caplog: pytest.LogCaptureFixture
) -> None:
    port, other = closed_port(), closed_port()

    def errors() -> float:
        return otel.total("otel_a2a.instrumentation.errors", error__type="export_unavailable")

    def written() -> list[str]:
        return [r.getMessage().split(",")[0] for r in caplog.records if r.name == GRPC_LOGGER]

    with caplog.at_level(logging.WARNING, logger=GRPC_LOGGER):
        first = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}", timeout=30)
        _export_then_shut_down(first, probe)
        assert written() == [
            f"Transient error StatusCode.UNAVAILABLE encountered while "
            f"exporting traces to 127.0.0.1:{port}"
        ]
        assert errors() == 1  # the "aborting retry" that the shutdown made
        again = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}", timeout=30)
        _export_then_shut_down(again, probe)
        assert len(written()) == 1 and errors() == 3  # the same endpoint: counted, not written
        elsewhere = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{other}", timeout=30)
        _export_then_shut_down(elsewhere, probe)
        assert len(written()) == 2 and f"127.0.0.1:{other}" in written()[1]
        assert errors() == 4
        again.shutdown()  # anything else the exporter says still goes through
        assert written()[-1] == "Exporter already shutdown"


def test_a_provider_shuts_down_within_its_exit_time_whatever_the_endpoint_does(
    otel: Harness, probe: Probe
) -> None:
    """The SDK's own shutdown would wait for the whole retry schedule (about 7 s) and then
    log the export's failure; bounded, the shutdown ends the retry it interrupts instead."""
    exporter = OTLPLogExporter(endpoint=f"http://127.0.0.1:{closed_port()}", timeout=30)
    processor = BatchLogRecordProcessor(exporter)
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(processor)
    provider.get_logger("app").emit(body="left for the exit")
    providers._shut_down_within(provider.shutdown, [processor], 0.2)
    probe.wait("Shutdown in progress, aborting retry.")  # the exporter ended its retry
    assert not any(m.startswith("Failed to export") for m in probe.seen), probe.seen
    assert sum(m.startswith("Transient error") for m in probe.seen) == 1, probe.seen

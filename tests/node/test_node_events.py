"""The event recorder: client-go's dedup, aggregation and spam filter, and a queue that never blocks."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import msgspec
import pytest
from nodekit import events_for

from podstatus.clients.embedded import EmbeddedClient
from podstatus.errors import NotFoundError
from podstatus.node.events import (
    COMBINED_PREFIX,
    DEFAULT_BURST,
    DEFAULT_QPS,
    EVENT_FILTERS,
    NORMAL,
    WARNING,
    EventCorrelator,
    EventRecorder,
    ObjectRef,
)
from podstatus.server.http import EmbeddedApiServer

POD = ObjectRef(kind="Pod", name="web", namespace="default", uid="u1")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Sink:
    """Records the requests; ``block`` holds every request until set."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []
        self.block = threading.Event()
        self.block.set()
        self.missing: set[str] = set()

    def create_event(self, namespace: str, event: dict[str, Any]) -> dict[str, Any]:
        self.block.wait()
        self.created.append(event)
        return event

    def patch_event(self, namespace: str, name: str, patch: bytes) -> dict[str, Any]:
        self.block.wait()
        if name in self.missing:
            raise NotFoundError(f'events "{name}" not found')
        self.patched.append((name, msgspec.json.decode(patch)))
        return {}


def recorder(sink: Any, clock: Clock, **options: Any) -> EventRecorder:
    rec = EventRecorder(sink, host="vn-1", clock=clock, correlator=EventCorrelator(clock=clock, **options))
    rec.start()
    return rec


def test_client_go_defaults() -> None:
    assert DEFAULT_BURST == 25
    assert DEFAULT_QPS == 1 / 300


def test_a_repeat_patches_count_and_last_timestamp_of_the_same_event() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock)
    rec.event(POD, "Warning", "BackOff", "Back-off restarting failed container app")
    clock.now += 30
    rec.event(POD, "Warning", "BackOff", "Back-off restarting failed container app")
    clock.now += 30
    rec.event(POD, "Warning", "BackOff", "Back-off restarting failed container app")
    assert rec.flush()
    assert len(sink.created) == 1
    name = sink.created[0]["metadata"]["name"]
    assert [(n, p["count"]) for n, p in sink.patched] == [(name, 2), (name, 3)]
    assert sink.patched[-1][1]["lastTimestamp"] > sink.created[0]["lastTimestamp"]
    assert sink.created[0]["source"] == {"component": "podstatus-node", "host": "vn-1"}
    rec.stop()


def test_a_different_message_is_a_different_event() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock)
    rec.event(POD, "Normal", "Pulling", 'Pulling image "a"')
    rec.event(POD, "Normal", "Pulling", 'Pulling image "b"')
    assert rec.flush()
    assert len(sink.created) == 2 and not sink.patched
    rec.stop()


def test_similar_events_are_aggregated_after_ten_messages() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock)
    for i in range(12):
        rec.event(POD, "Warning", "Unhealthy", f"Readiness probe failed: attempt {i}")
    assert rec.flush()
    assert len(sink.created) == 10  # nine distinct, then the combined one
    assert sink.created[-1]["message"] == COMBINED_PREFIX + "Readiness probe failed: attempt 9"
    assert [p["count"] for _, p in sink.patched] == [2, 3]
    assert sink.patched[-1][1]["message"] == COMBINED_PREFIX + "Readiness probe failed: attempt 11"
    rec.stop()


class CapturingWriter:
    """Stands in for the writer pool: keeps the queued bodies instead of writing them."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def submit(self, key: str, fn: Any, body: dict[str, Any]) -> bool:
        self.bodies.append(body)
        return True


def test_aggregation_forgets_after_the_window() -> None:
    clock = Clock()
    corr = EventCorrelator(clock=clock, burst=1000)
    writer = CapturingWriter()
    rec = EventRecorder(Sink(), host="vn-1", clock=clock, correlator=corr, writer=writer, queue_size=100)  # type: ignore[arg-type]
    for i in range(10):
        rec.event(POD, "Warning", "Unhealthy", f"probe {i}")
    results = [corr.correlate(b) for b in writer.bodies]
    assert results[-1] is not None and results[-1].event["message"].startswith(COMBINED_PREFIX)
    clock.now += 601
    rec.event(POD, "Warning", "Unhealthy", "probe 10")
    late = corr.correlate(writer.bodies[-1])
    assert late is not None and late.event["message"] == "probe 10"


def test_spam_filter_allows_a_burst_then_one_per_five_minutes() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock)
    for i in range(30):
        rec.event(POD, "Normal", f"Reason{i}", "m")  # distinct reasons: no aggregation, no dedup
    assert rec.flush()
    assert len(sink.created) == 25
    assert rec.stats.dropped_spam == 5
    clock.now += 299
    rec.event(POD, "Normal", "Late", "m")
    assert rec.flush()
    assert len(sink.created) == 25
    clock.now += 2  # 301 s since the bucket emptied: one token back
    rec.event(POD, "Normal", "Later", "m")
    assert rec.flush()
    assert len(sink.created) == 26
    other = ObjectRef(kind="Pod", name="db", namespace="default", uid="u2")
    rec.event(other, "Normal", "Any", "m")  # another object has its own bucket
    assert rec.flush()
    assert len(sink.created) == 27
    rec.stop()


def test_a_gone_event_is_created_again() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock)
    rec.event(POD, "Warning", "BackOff", "m")
    assert rec.flush()
    sink.missing.add(sink.created[0]["metadata"]["name"])
    rec.event(POD, "Warning", "BackOff", "m")
    assert rec.flush()
    assert len(sink.created) == 2
    assert sink.created[1]["count"] == 2
    assert sink.created[1]["metadata"]["name"] != sink.created[0]["metadata"]["name"]
    rec.stop()


def test_recording_never_blocks_even_when_the_api_hangs() -> None:
    sink, clock = Sink(), Clock()
    sink.block.clear()
    rec = EventRecorder(sink, host="vn-1", clock=clock, queue_size=5)
    rec.start()
    started = time.monotonic()
    for i in range(50):
        rec.event(POD, "Normal", f"R{i}", "m")
    assert time.monotonic() - started < 0.5
    assert rec.stats.dropped_queue >= 40
    sink.block.set()
    assert rec.flush()
    rec.stop()


def test_events_reach_the_server(tmp_path: Any) -> None:
    with EmbeddedApiServer() as server:
        client = EmbeddedClient(server)
        rec = EventRecorder(client, host="vn-1")
        rec.start()
        rec.event(POD, "Normal", "Started", "Started container app")
        rec.event(POD, "Normal", "Started", "Started container app")
        assert rec.flush()
        rec.stop()
        (event,) = events_for(client)
        assert event["involvedObject"]["name"] == "web" and event["count"] == 2


# --- which types are written (events="all" | "warning" | "none") ---------------------------------


def _record_one_of_each(rec: EventRecorder) -> None:
    rec.event(POD, NORMAL, "Started", "Started container app")
    rec.event(POD, WARNING, "BackOff", "Back-off restarting failed container app")
    rec.event(POD, NORMAL, "Killing", "Stopping container app")


def test_all_is_the_default_and_writes_normal_and_warning() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock)
    assert rec.events == "all" and EVENT_FILTERS["all"] == {NORMAL, WARNING}
    _record_one_of_each(rec)
    assert rec.flush()
    rec.stop()
    assert [e["reason"] for e in sink.created] == ["Started", "BackOff", "Killing"]
    assert rec.stats.filtered == 0 and rec.stats.created == 3


def test_warning_writes_only_warnings_and_counts_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    sink, clock = Sink(), Clock()
    rec = EventRecorder(sink, host="vn-1", clock=clock, events="warning")
    rec.start()
    with caplog.at_level(logging.DEBUG, logger="podstatus.node.events"):
        _record_one_of_each(rec)
    assert rec.flush()
    rec.stop()
    assert [(e["type"], e["reason"]) for e in sink.created] == [(WARNING, "BackOff")]
    assert rec.stats.filtered == 2 and rec.stats.created == 1
    # Still logged, at debug.
    filtered = [r for r in caplog.records if "not written" in r.getMessage()]
    assert [r.levelno for r in filtered] == [logging.DEBUG, logging.DEBUG]
    assert "reason=Started" in filtered[0].getMessage()


def test_none_writes_nothing() -> None:
    sink, clock = Sink(), Clock()
    rec = EventRecorder(sink, host="vn-1", clock=clock, events="none")
    rec.start()
    _record_one_of_each(rec)
    assert rec.flush()
    rec.stop()
    assert sink.created == [] and sink.patched == []
    assert rec.stats.filtered == 3 and rec.stats.created == 0


def test_filtered_events_do_not_use_the_spam_filter_budget() -> None:
    sink, clock = Sink(), Clock()
    rec = EventRecorder(
        sink, host="vn-1", clock=clock, events="warning", correlator=EventCorrelator(clock=clock, burst=2)
    )
    rec.start()
    for i in range(10):
        rec.event(POD, NORMAL, f"Normal{i}", "m")
    rec.event(POD, WARNING, "W1", "m")
    rec.event(POD, WARNING, "W2", "m")
    assert rec.flush()
    rec.stop()
    assert [e["reason"] for e in sink.created] == ["W1", "W2"]
    assert rec.stats.dropped_spam == 0


def test_an_unknown_filter_is_refused() -> None:
    with pytest.raises(ValueError, match="all, warning, none"):
        EventRecorder(Sink(), events="warnings")

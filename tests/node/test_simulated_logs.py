"""Container logs of the simulated provider: lifecycle lines, options, previous, follow, bounds."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from simkit import pod, provider, wait_for

from podstatus.node import Timings
from podstatus.node.capabilities import LogOptions
from podstatus.node.simlogs import MAX_BYTES, MAX_LINES, ContainerLog, format_time
from podstatus.node.simstreams import SimulatedError


def _text(data: object) -> str:
    assert isinstance(data, bytes)
    return data.decode()


def test_a_serving_container_logs_its_start_and_readiness() -> None:
    p = provider()
    try:
        p.create_pod(pod("web", ports=[80]))
        lines = _text(p.get_container_logs("default", "web", "app", LogOptions())).splitlines()
        assert lines[0] == "starting app: image nginx:1.27, pod default/web"
        assert lines[1:3] == ["listening on :80", "ready"]
    finally:
        p.close()


def test_tail_timestamps_and_limit_bytes_are_honoured() -> None:
    p = provider()
    try:
        p.create_pod(pod("web", ports=[80]))
        assert _text(p.get_container_logs("default", "web", "app", LogOptions(tail_lines=1))) == "ready\n"
        assert p.get_container_logs("default", "web", "app", LogOptions(tail_lines=0)) == b""
        stamped = _text(p.get_container_logs("default", "web", "app", LogOptions(timestamps=True)))
        for line in stamped.splitlines():
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z \S.*", line), line
        assert p.get_container_logs("default", "web", "app", LogOptions(limit_bytes=8)) == b"starting"
    finally:
        p.close()


def test_since_drops_older_lines() -> None:
    p = provider()
    try:
        p.create_pod(pod("web"))
        future = datetime.now(UTC) + timedelta(seconds=60)
        assert p.get_container_logs("default", "web", "app", LogOptions(since_time=future)) == b""
        past = datetime.now(UTC) - timedelta(seconds=60)
        assert (
            b"ready"
            in _text(p.get_container_logs("default", "web", "app", LogOptions(since_time=past))).encode()
        )
        assert (
            b"ready"
            in _text(p.get_container_logs("default", "web", "app", LogOptions(since_seconds=60))).encode()
        )
    finally:
        p.close()


def test_previous_is_the_instance_before_a_restart() -> None:
    timings = Timings(
        image_pull=(0.0, 0.0),
        init_run=(0.0, 0.0),
        startup=(0.0, 0.0),
        readiness=(0.0, 0.0),
        crash_run=(0.05, 0.05),
        crash_backoff=0.05,
        crash_backoff_max=0.05,
        stop=(0.0, 0.0),
    )
    p = provider(timings)
    try:
        p.create_pod(pod("loop", "crash"))
        sim = p.sim_pod("uid-loop")
        assert sim is not None
        wait_for(lambda: sim.containers[0].restart_count >= 2 and sim.containers[0].state == "running")
        with p._lock:  # a stable moment: running again after at least two crashes
            previous = _text(p.get_container_logs("default", "loop", "app", LogOptions(previous=True)))
            current = _text(p.get_container_logs("default", "loop", "app", LogOptions()))
            restarts = sim.containers[0].restart_count
        assert "panic: simulated crash; exit code 1" in previous
        assert f"(restart {restarts - 1})" in previous or restarts == 1
        assert f"starting app (restart {restarts})" in current
        assert "panic" not in current
    finally:
        p.close()


def test_previous_without_a_restart_is_refused_as_the_kubelet_does() -> None:
    p = provider()
    try:
        p.create_pod(pod("web"))
        with pytest.raises(SimulatedError) as err:
            p.get_container_logs("default", "web", "app", LogOptions(previous=True))
        assert err.value.status == 400
        assert str(err.value) == 'previous terminated container "app" in pod "web" not found'
    finally:
        p.close()


def test_a_waiting_container_has_no_logs_yet_and_unknown_names_are_404() -> None:
    slow = Timings(image_pull=(30.0, 30.0))
    p = provider(slow)
    try:
        p.create_pod(pod("web"))
        with pytest.raises(SimulatedError) as err:
            p.get_container_logs("default", "web", "app", LogOptions())
        assert err.value.status == 400
        assert "is waiting to start: ContainerCreating" in str(err.value)
        with pytest.raises(SimulatedError) as err:
            p.get_container_logs("default", "web", "nope", LogOptions())
        assert err.value.status == 404 and 'container "nope" not found in pod "web"' in str(err.value)
        with pytest.raises(SimulatedError) as err:
            p.get_container_logs("default", "ghost", "app", LogOptions())
        assert err.value.status == 404 and '"ghost"' in str(err.value) and "vn-1" in str(err.value)
    finally:
        p.close()


def test_follow_gets_new_lines_and_ends_when_the_container_stops() -> None:
    timings = Timings(
        image_pull=(0.0, 0.0),
        init_run=(0.0, 0.0),
        startup=(0.0, 0.0),
        readiness=(0.0, 0.0),
        job_run=(2.5, 2.5),
        stop=(0.0, 0.0),
    )
    p = provider(timings)
    try:
        p.create_pod(pod("job", "complete", restart="Never"))
        stream = p.get_container_logs("default", "job", "app", LogOptions(follow=True))
        assert not isinstance(stream, bytes)

        async def collect() -> list[bytes]:
            return [chunk async for chunk in stream]

        started = time.monotonic()
        chunks = asyncio.run(asyncio.wait_for(collect(), 20))
        text = b"".join(chunks).decode()
        assert text.startswith("starting app")
        assert "working: step 1\nworking: step 2\n" in text  # periodic lines, made as they fell due
        assert text.endswith("done; exit code 0\n")
        assert len(chunks) >= 3  # what was there, then lines as they came
        assert time.monotonic() - started >= 1.0  # it waited for the lines; it did not end at once
    finally:
        p.close()


def test_follow_stops_at_limit_bytes() -> None:
    p = provider()
    try:
        p.create_pod(pod("web"))
        head = len(p.get_container_logs("default", "web", "app", LogOptions()))  # type: ignore[arg-type]
        stream = p.get_container_logs("default", "web", "app", LogOptions(follow=True, limit_bytes=head + 4))
        assert not isinstance(stream, bytes)
        sim = p.sim_pod("uid-web")
        assert sim is not None and sim.containers[0].log is not None
        log = sim.containers[0].log

        async def collect() -> bytes:
            out = b""
            async for chunk in stream:
                out += chunk
                if len(out) == head:
                    log.write("one more line")
            return out

        out = asyncio.run(asyncio.wait_for(collect(), 10))
        assert len(out) == head + 4 and out.endswith(b"one ")
    finally:
        p.close()


def test_the_ring_is_bounded_in_lines_and_bytes() -> None:
    log = ContainerLog()
    for n in range(5 * MAX_LINES):
        log.write(f"line {n}")
    lines, seq, closed = log.snapshot()
    assert len(lines) == MAX_LINES and seq == 5 * MAX_LINES and not closed
    assert lines[-1][1] == f"line {5 * MAX_LINES - 1}".encode()
    big = ContainerLog()
    for _ in range(100):
        big.write("x" * 4000)
    lines, _, _ = big.snapshot()
    assert sum(len(text) + 1 for _, text in lines) <= MAX_BYTES


def test_periodic_lines_are_made_lazily_and_only_as_many_as_the_ring_holds() -> None:
    log = ContainerLog()
    log.every(1.0, lambda n: f"tick {n}", start=time.time() - 1_000_000)  # a million lines due
    lines, _, _ = log.snapshot()
    assert len(lines) == MAX_LINES
    assert lines[-1][1] == b"tick 1000000"


def test_format_time_is_rfc3339_nano_as_the_kubelet_writes_it() -> None:
    assert format_time(0.0) == "1970-01-01T00:00:00Z"
    assert format_time(1.5) == "1970-01-01T00:00:01.5Z"
    assert format_time(1.000123) == "1970-01-01T00:00:01.000123Z"


def test_a_hundred_followers_get_their_lines_and_end_when_their_pods_are_deleted() -> None:
    p = provider()
    try:
        names = [f"web-{i}" for i in range(100)]
        for name in names:
            p.create_pod(pod(name))

        async def follow(name: str, started: asyncio.Event) -> bytes:
            stream = p.get_container_logs("default", name, "app", LogOptions(follow=True, tail_lines=0))
            assert not isinstance(stream, bytes)
            out = b""
            async for chunk in stream:
                out += chunk
                started.set()
            return out

        async def run() -> list[bytes]:
            firsts = [asyncio.Event() for _ in names]
            tasks = [asyncio.ensure_future(follow(n, e)) for n, e in zip(names, firsts, strict=True)]
            await asyncio.sleep(0.1)  # every follower is waiting
            for name in names:
                sim = p.sim_pod(f"uid-{name}")
                assert sim is not None and sim.containers[0].log is not None
                sim.containers[0].log.write(f"hello {name}")
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in firsts)), 10)
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(None, p.delete_pod, pod(n), 0) for n in names))
            return await asyncio.wait_for(asyncio.gather(*tasks), 10)

        outputs = asyncio.run(run())
        for name, out in zip(names, outputs, strict=True):
            assert out == f"hello {name}\nreceived SIGTERM, shutting down; exit code 0\n".encode()
    finally:
        p.close()

"""Flag: a threading.Event that is a boolean until a thread waits on it."""

from __future__ import annotations

import threading
import time

from podstatus.flags import Flag


def test_a_flag_never_waited_on_holds_no_event() -> None:
    flag = Flag()
    assert not flag.is_set()
    flag.set()
    assert flag.is_set()
    flag.clear()
    assert not flag.is_set()
    assert flag._event is None  # the point of it


def test_waiting_on_a_set_flag_returns_at_once() -> None:
    flag = Flag()
    flag.set()
    started = time.monotonic()
    assert flag.wait(5)
    assert time.monotonic() - started < 1
    assert flag.is_set()


def test_a_wait_times_out_and_a_set_from_another_thread_wakes_it() -> None:
    flag = Flag()
    assert flag.wait(0.01) is False
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(flag.wait(5)))
    waiter.start()
    time.sleep(0.05)
    flag.set()
    waiter.join(5)
    assert woke == [True]
    flag.clear()
    assert not flag.is_set() and flag.wait(0.01) is False


def test_set_and_wait_racing_from_many_threads_lose_no_wake_up() -> None:
    def wait_on(flag: Flag, results: list[bool]) -> None:
        results.append(flag.wait(5))

    for _ in range(200):
        flag = Flag()
        results: list[bool] = []
        waiters = [threading.Thread(target=wait_on, args=(flag, results)) for _ in range(3)]
        for t in waiters:
            t.start()
        flag.set()
        for t in waiters:
            t.join(5)
        assert results == [True, True, True]

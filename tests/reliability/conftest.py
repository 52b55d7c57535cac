"""Shared bits of the reliability tests: the counts each test reports at the end of the run."""

from __future__ import annotations

import threading

import pytest

_lock = threading.Lock()
_reports: list[str] = []


def report(line: str) -> None:
    """A line for the end-of-run summary (printed even without ``-s``) and for ``-s`` runs at once."""
    with _lock:
        _reports.append(line)
    print(line)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _reports:
        terminalreporter.section("reliability counts")
        for line in _reports:
            terminalreporter.write_line(line)

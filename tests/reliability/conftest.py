"""Shared bits of the reliability tests: the counts each test reports, printed at the end of the run."""

from __future__ import annotations

import pytest
from relkit import reports


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = reports()
    if lines:
        terminalreporter.section("reliability counts")
        for line in lines:
            terminalreporter.write_line(line)

"""The README's example runs as shown, so it stays true."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_example_runs_and_prints_what_it_says() -> None:
    blocks = _python_blocks()
    assert blocks, "the README has a python example"
    example = blocks[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, str(README), "exec"), {"__name__": "readme_example"})
    # The comment in the README says what it prints.
    promised = re.findall(r"print\(.*\)\s+#\s*(\S+)", example)
    assert promised == ["Running"]
    assert out.getvalue().split() == promised


def test_readme_provider_example_runs() -> None:
    blocks = _python_blocks()
    example = next(b for b in blocks if "class InstantProvider" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, str(README), "exec"), {"__name__": "readme_provider"})
    promised = re.findall(r"print\(.*\)\s+#\s*(\S+)", example)
    assert promised == ["Running"]
    assert out.getvalue().split() == promised

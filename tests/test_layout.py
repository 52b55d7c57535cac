"""The repository's shape: module sizes, and tests/ mirroring src/ (docs/design.md, "Layout rules").

Every module under src/podstatus is at most ``MAX_LINES`` lines unless docs/design.md lists
it in its table "Modules over 800 lines" with a reason; a listed module that shrank or went
away must leave the table too, so the table says what is true. Each subpackage of
src/podstatus has its tests in tests/<name>/; the suites kept by purpose (``PURPOSE_SUITES``)
stay apart from those. Each rule is checked on this tree and, on a temporary tree, shown to
fail when it breaks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 800
OVERSIZE_HEADING = "Modules over 800 lines"
# Suites kept by what they test, not by module: they need real servers or long runs.
PURPOSE_SUITES = frozenset({"integration", "apiserver_suite", "controlplane_suite", "reliability"})


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def oversize_table(design: str) -> dict[str, str]:
    """The rows of the table under the heading "Modules over 800 lines": module path -> reason.

    A row is ``| `src/podstatus/x.py` | lines | reason |``; the path is the first backquoted
    cell, the reason the last cell. Only the first table after the heading counts.
    """
    heading = re.search(rf"^#+\s+{re.escape(OVERSIZE_HEADING)}\s*$", design, flags=re.M)
    if heading is None:
        return {}
    rows: dict[str, str] = {}
    in_table = False
    for line in design[heading.end() :].splitlines():
        if not line.startswith("|"):
            if in_table:
                break
            if line.startswith("#"):
                break
            continue
        in_table = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        module = re.fullmatch(r"`([^`]+\.py)`", cells[0])
        if module is None:
            continue  # the header row and its |---| line
        rows[module.group(1)] = cells[-1] if len(cells) > 1 else ""
    return rows


def size_problems(root: Path, table: dict[str, str]) -> list[str]:
    """Modules over the limit without a row (or with an empty reason), and rows no longer true."""
    problems: list[str] = []
    sizes = {p.relative_to(root).as_posix(): line_count(p) for p in (root / "src").rglob("*.py")}
    for module, lines in sorted(sizes.items()):
        if lines > MAX_LINES and module not in table:
            problems.append(
                f"{module} has {lines} lines (limit {MAX_LINES}): split it by concept, or add it with "
                f"a reason to the table {OVERSIZE_HEADING!r} in docs/design.md"
            )
        elif lines > MAX_LINES and not table[module]:
            problems.append(f"{module}: its row in {OVERSIZE_HEADING!r} gives no reason")
    for module in sorted(table):
        if module not in sizes:
            problems.append(f"{module} is in {OVERSIZE_HEADING!r} but does not exist: remove its row")
        elif sizes[module] <= MAX_LINES:
            problems.append(
                f"{module} has {sizes[module]} lines now, within the limit: remove its row from {OVERSIZE_HEADING!r}"
            )
    return problems


def mirror_problems(root: Path) -> list[str]:
    """A subpackage without tests/<name>/, or a folder of tests that is neither a mirror nor a purpose suite."""
    package = root / "src" / "podstatus"
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    modules = {p.stem for p in package.glob("*.py")}
    tests = root / "tests"
    problems = [
        f"src/podstatus/{name}/ has no tests/{name}/ folder"
        for name in sorted(subpackages)
        if not (tests / name).is_dir()
    ]
    problems += [
        f"purpose suite tests/{name}/ is missing"
        for name in sorted(PURPOSE_SUITES)
        if not (tests / name).is_dir()
    ]
    for folder in sorted(p for p in tests.iterdir() if p.is_dir()):
        if not any(folder.glob("test_*.py")):
            continue  # programs, fixtures and tools the tests use
        if folder.name not in subpackages | modules | PURPOSE_SUITES:
            problems.append(
                f"tests/{folder.name}/ holds tests but mirrors no part of src/podstatus and is no purpose suite"
            )
    return problems


# --- this tree ------------------------------------------------------------------------------


def test_no_module_over_the_limit_without_a_reason() -> None:
    table = oversize_table((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    assert size_problems(ROOT, table) == []


def test_tests_mirror_src() -> None:
    assert mirror_problems(ROOT) == []


# --- the rules break on a tree that breaks them -------------------------------------------------

DESIGN = """# notes

## Modules over 800 lines

| module | lines | why |
|---|---|---|
| `src/podstatus/big.py` | 900 | being split (issue 23) |

## Next section

| `src/podstatus/other.py` | 1 | not part of the table |
"""


def _tree(tmp_path: Path, modules: dict[str, int], test_dirs: list[str]) -> Path:
    for name, lines in modules.items():
        path = tmp_path / "src" / "podstatus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n" * lines, encoding="utf-8")
    for name in test_dirs:
        (tmp_path / "tests" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / name / "test_it.py").write_text("", encoding="utf-8")
    return tmp_path


def test_the_table_is_read_from_its_section_only() -> None:
    assert oversize_table(DESIGN) == {"src/podstatus/big.py": "being split (issue 23)"}
    assert oversize_table("# notes\n\nno table\n") == {}


@pytest.mark.parametrize(
    ("modules", "table", "expected"),
    [
        ({"__init__.py": 1, "small.py": MAX_LINES}, {}, []),
        ({"big.py": MAX_LINES + 1}, {"src/podstatus/big.py": "being split"}, []),
        ({"big.py": MAX_LINES + 1}, {}, ["src/podstatus/big.py has 801 lines"]),
        ({"server/huge.py": 2000}, {}, ["src/podstatus/server/huge.py has 2000 lines"]),
        ({"big.py": MAX_LINES + 1}, {"src/podstatus/big.py": ""}, ["gives no reason"]),
        (
            {"big.py": MAX_LINES},
            {"src/podstatus/big.py": "being split"},
            ["within the limit: remove its row"],
        ),
        ({}, {"src/podstatus/gone.py": "being split"}, ["does not exist: remove its row"]),
    ],
    ids=["within", "listed", "unlisted", "unlisted-in-subpackage", "no-reason", "shrank", "gone"],
)
def test_size_rule(
    tmp_path: Path, modules: dict[str, int], table: dict[str, str], expected: list[str]
) -> None:
    problems = size_problems(_tree(tmp_path, modules, []), table)
    assert len(problems) == len(expected), problems
    for problem, words in zip(problems, expected):
        assert words in problem


@pytest.mark.parametrize(
    ("test_dirs", "expected"),
    [
        (["server", "manager", *PURPOSE_SUITES], []),
        (["manager", *PURPOSE_SUITES], ["src/podstatus/server/ has no tests/server/ folder"]),
        (
            ["server", "manager", "reliability", "integration", "controlplane_suite"],
            ["tests/apiserver_suite/ is missing"],
        ),
        (["server", "servers", *PURPOSE_SUITES], ["tests/servers/ holds tests but mirrors no part"]),
    ],
    ids=["mirrored", "subpackage-without-tests", "purpose-suite-missing", "stray-folder"],
)
def test_mirror_rule(tmp_path: Path, test_dirs: list[str], expected: list[str]) -> None:
    root = _tree(tmp_path, {"__init__.py": 1, "manager.py": 1, "server/__init__.py": 1}, test_dirs)
    (root / "tests" / "fixtures").mkdir()  # no tests in it: not a mirror, and no problem
    problems = mirror_problems(root)
    assert len(problems) == len(expected), problems
    for problem, words in zip(problems, expected):
        assert words in problem

"""bench/scale/compare.py: each checkout's own code runs, and the table holds medians and new/old."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench.scale import compare, harness

import podstatus

ROOT = Path(__file__).resolve().parent.parent


def _checkout(root: Path) -> Path:
    """A checkout whose podstatus is not this tree's: its cli says where it runs from, and stops."""
    package = root / "src" / "podstatus"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "cli.py").write_text(
        "import sys\nprint('podstatus.cli from', __file__, 'args', ' '.join(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    return root


def test_the_checkouts_own_src_wins_over_the_installed_podstatus(tmp_path: Path) -> None:
    checkout = compare.Checkout("old", _checkout(tmp_path / "old"), sys.executable)
    assert (
        compare.podstatus_origin(checkout) == (checkout.root / "src" / "podstatus" / "__init__.py").resolve()
    )
    compare.check_origin(checkout)  # accepted: no SystemExit


def test_a_checkout_whose_import_resolves_elsewhere_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty" / "src").mkdir(parents=True)
    checkout = compare.Checkout("new", tmp_path / "empty", sys.executable)
    # Its src holds no podstatus: the import falls through to the installed one (this tree's).
    assert compare.podstatus_origin(checkout) == Path(podstatus.__file__).resolve()
    with pytest.raises(SystemExit, match="not from"):
        compare.check_origin(checkout)


def test_the_node_process_the_harness_starts_runs_the_checkouts_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness's own launch of ``podstatus node``, in the environment compare gives the harness."""
    checkout = compare.Checkout("new", _checkout(tmp_path / "new"), sys.executable)
    monkeypatch.setenv("PYTHONPATH", checkout.env()["PYTHONPATH"])
    workdir = tmp_path / "run"
    workdir.mkdir()
    proc = harness.PodstatusContender().start("kubeconfig.yaml", 3, workdir)
    assert proc.wait(timeout=60) == 0
    log = (workdir / "podstatus-node.log").read_text(encoding="utf-8")
    assert f"podstatus.cli from {checkout.root / 'src' / 'podstatus' / 'cli.py'}" in log
    assert "args node --kubeconfig kubeconfig.yaml --nodes 3" in log


def _run(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"contender": "podstatus", "nodes": 100, "pods": 1000, "completed": True}
    return {**base, **fields}


def test_the_table_gives_each_sides_median_and_new_over_old() -> None:
    old = [
        _run(cpu_s=3.0, start_cpu_s=0.5, peak_rss=60 * 2**20, requests={"patch": 2000, "get": 100}),
        _run(cpu_s=5.0, start_cpu_s=0.5, peak_rss=64 * 2**20, requests={"patch": 2000, "get": 120}),
        _run(cpu_s=4.0, start_cpu_s=0.7, peak_rss=62 * 2**20, requests={"patch": 2000, "get": 110}),
    ]
    new = [
        _run(cpu_s=2.0, start_cpu_s=0.4, peak_rss=62 * 2**20, requests={"patch": 1000}),
        _run(cpu_s=6.0, start_cpu_s=0.4, peak_rss=62 * 2**20, requests={"patch": 1000}),
    ]
    rows = {
        line.split(" | ")[0].strip("| "): line for line in compare.comparison_table(old, new).splitlines()
    }
    assert rows["contender CPU (s)"] == "| contender CPU (s) | 4.0 (3.0, 5.0, 4.0) | 4.0 (2.0, 6.0) | 1.00 |"
    assert (
        rows["of which start-up (s)"]
        == "| of which start-up (s) | 0.50 (0.50, 0.50, 0.70) | 0.40 (0.40, 0.40) | 0.80 |"
    )
    assert (
        rows["after start-up (s)"] == "| after start-up (s) | 3.3 (2.5, 4.5, 3.3) | 3.6 (1.6, 5.6) | 1.09 |"
    )
    assert rows["peak RSS (MiB)"] == "| peak RSS (MiB) | 62 (60, 64, 62) | 62 (62, 62) | 1.00 |"
    assert rows["API requests"] == "| API requests | 2110 (2100, 2120, 2110) | 1000 (1000, 1000) | 0.47 |"
    # Figures a run does not have are shown as such, never as zero.
    assert rows["etcd CPU (s)"] == "| etcd CPU (s) | — (—, —, —) | — (—, —) | — |"
    assert rows["missed heartbeats"] == "| missed heartbeats | 0 (0, 0, 0) | 0 (0, 0) | = |"


@pytest.mark.apiserver
@pytest.mark.timeout(900)
def test_compare_runs_the_harness_for_both_checkouts_on_kube_apiserver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subprocess.run([str(harness.START), "--build-only"], check=True)
    both = ["--old", str(ROOT), "--new", str(ROOT)]
    code = compare.main([*both, "--runs", "1", "--size", "2x10", "--hold", "1", "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (tmp_path / "old-1.json").exists() and (tmp_path / "new-1.json").exists()
    row = next(line for line in out.splitlines() if line.startswith("| pod requests per pod |"))
    assert "old: median (runs, n=1)" in out and "new: median (runs, n=1)" in out
    assert "— (" not in row


def test_write_adds_each_comparison_to_its_section_and_keeps_the_rest(tmp_path: Path) -> None:
    page = tmp_path / "scale.md"
    page.write_text("# Scale\n\nthe harness's page\n", encoding="utf-8")
    compare.write_section(page, "### first\n\n| a |\n")
    compare.write_section(page, "### second\n\n| b |\n")
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Scale\n\nthe harness's page\n\n" + compare.SECTION + "\n")
    assert text.count(compare.SECTION) == 1
    assert text.index("### first") < text.index("### second")
    # A section after it (say the harness page grows one) stays after it, untouched.
    page.write_text(text + "\n## Later\n\nmore\n", encoding="utf-8")
    compare.write_section(page, "### third\n")
    text = page.read_text(encoding="utf-8")
    assert text.index("### second") < text.index("### third") < text.index("## Later")
    assert text.endswith("## Later\n\nmore\n")


def test_new_args_go_to_the_new_checkouts_harness_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A phase only the new harness has (its follow phase) is turned off on the new side alone, so
    # both sides measure the same workload; options after -- still go to both.
    calls: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(compare, "check_origin", lambda checkout: None)
    monkeypatch.setattr(compare, "compile_bytecode", lambda checkout: None)
    monkeypatch.setattr(
        compare,
        "run_harness",
        lambda checkout, size, hold, page, extra: calls.append((checkout.label, list(extra))),
    )
    monkeypatch.setattr(compare, "git_commit", lambda root: "c0ffee0")
    monkeypatch.setattr(compare, "git_describe", lambda root: "c0ffee0 a commit")
    argv = ["--old", str(tmp_path), "--new", str(tmp_path), "--runs", "2", "--workdir", str(tmp_path)]
    compare.main([*argv, "--new-args=--follow=0 --follow-hold 5", "--", "--events", "all"])
    assert calls == [
        ("old", ["--events", "all"]),
        ("new", ["--events", "all", "--follow=0", "--follow-hold", "5"]),
        ("new", ["--events", "all", "--follow=0", "--follow-hold", "5"]),
        ("old", ["--events", "all"]),
    ]

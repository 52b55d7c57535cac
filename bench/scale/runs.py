"""Repeated runs of the scale harness on one page: each size and contender's median run as its
row, every run's figures in the notes.

    python -m bench.scale.runs --write docs/scale.md --add /tmp/runs/on-1.json /tmp/runs/off-1.json ...

The inputs are the ``.json`` twins that ``bench.scale.harness --write`` leaves. On a shared
machine one run says little: this puts several side by side (kubelet API on and off,
alternated) and takes, for each label, the run whose CPU at rest is the median (the upper
one of an even count) as the table's row; the notes give every run's CPU at rest, requests
without Lease renewals and load at start, and the medians' on/off ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path

from .harness import (
    RunResult,
    _contender,
    _key,
    _per_minute,
    git_commit,
    requests_at_rest,
    requests_without_renewals,
    save,
)


def load(paths: list[Path]) -> tuple[list[RunResult], list[dict[str, str]], list[tuple[str, str]]]:
    """Every run of the given pages (their ``.json`` twins), the invocations that made them, their notes."""
    results: list[RunResult] = []
    invocations: list[dict[str, str]] = []
    notes: list[tuple[str, str]] = []
    for path in paths:
        data = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        results += [RunResult(**d) for d in data["results"]]
        invocations += data["invocations"]
        notes += [(label, text) for label, text in data["notes"]]
    return results, invocations, notes


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def pick(runs: list[RunResult]) -> RunResult:
    """The run whose CPU at rest is the median (the upper middle one of an even count)."""
    measured = sorted((r for r in runs if _per_minute(r) is not None), key=lambda r: _per_minute(r) or 0.0)
    return measured[len(measured) // 2] if measured else runs[0]


def summary(runs: list[RunResult]) -> str:
    """Every run's CPU at rest, requests without Lease renewals, follow streams held, and load."""
    rest = [_per_minute(r) for r in runs]
    parts = [
        f"{len(runs)} runs; CPU at rest (s/min) "
        + ", ".join("—" if v is None else f"{v:.2f}" for v in rest)
        + f" (median {_median([v for v in rest if v is not None]) or 0:.2f})",
        "API requests without Lease renewals " + ", ".join(str(requests_without_renewals(r)) for r in runs),
        "load at start " + ", ".join(f"{r.load:.1f}" for r in runs),
    ]
    at_rest = [requests_at_rest(r) for r in runs]
    if any(v is not None for v in at_rest):
        parts.insert(
            2, "requests at rest per min " + ", ".join("—" if v is None else f"{v:.0f}" for v in at_rest)
        )
    if any(r.follow_streams for r in runs):
        parts.append(
            "kubectl logs -f held (receiving lines) "
            + ", ".join(f"{r.follow_receiving}/{r.follow_streams}" for r in runs)
        )
    return "; ".join(parts)


def combine(results: list[RunResult]) -> tuple[list[RunResult], list[tuple[str, str]]]:
    """One row per label (the median run), and notes: every run, and the kubelet API's on/off ratio."""
    by_key: dict[str, list[RunResult]] = {}
    for r in results:
        by_key.setdefault(_key(r), []).append(r)
    rows = [pick(runs) for runs in by_key.values()]
    notes = [(key, summary(runs)) for key, runs in by_key.items() if len(runs) > 1]
    for key, runs in by_key.items():
        first = runs[0]
        if first.contender != "podstatus" or first.kubelet_api is not True:
            continue
        off = by_key.get(_key(RunResult(**{**first.__dict__, "kubelet_api": False})))
        if not off:
            continue
        on_rest = _median([v for r in runs if (v := _per_minute(r)) is not None])
        off_rest = _median([v for r in off if (v := _per_minute(r)) is not None])
        if on_rest is not None and off_rest:
            label = key.replace(_contender(first), "kubelet API on / off")
            notes.append(
                (
                    label,
                    f"median CPU at rest {on_rest:.2f} against {off_rest:.2f} s/min: "
                    f"{100 * (on_rest / off_rest - 1):+.0f} % with the kubelet API "
                    f"({len(runs)} and {len(off)} runs, alternated)",
                )
            )
    return rows, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+", type=Path, help="pages written by bench.scale.harness --write")
    parser.add_argument("--write", required=True, help="the page to write (docs/scale.md)")
    parser.add_argument("--add", action="store_true", help="keep the runs of other labels already there")
    args = parser.parse_args(argv)
    results, invocations, kept = load(args.pages)
    rows, notes = combine(results)
    notes = kept + notes
    command = "python -m bench.scale.runs " + " ".join(argv if argv is not None else sys.argv[1:])
    # The runs' own commands first, then this one, which chose the rows from them.
    this = {
        "command": command,
        "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "machine": "(no run: the rows above, the median run of each label)",
    }
    save(Path(args.write), rows, notes, [*invocations, this], add=args.add)
    return 0


if __name__ == "__main__":
    sys.exit(main())

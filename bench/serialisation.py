"""The measurement behind the choice of serialisation library (docs/serialisation.md).

    python bench/serialisation.py [--quick] [--write docs/serialisation.md]

For the fixture pod (a 4-container running pod as the API returns it), four ways
of holding a pod:

* msgspec: our types (``podstatus.types``: frozen ``msgspec.Struct``s, unknown
  fields kept);
* pydantic v2: equivalent minimal models (Pod, ObjectMeta, PodSpec, Container,
  PodStatus, PodCondition, ContainerStatus, ContainerState...), ``frozen``,
  ``extra="allow"`` so unknown fields survive, camelCase aliases;
* plain dicts: ``json.loads`` / ``json.dumps`` / ``copy.deepcopy``;
* the official ``kubernetes`` models (``ApiClient().deserialize`` to ``V1Pod``,
  ``sanitize_for_serialization`` + ``json.dumps``).

Operations: decode (JSON bytes to object), encode (object to JSON bytes, the
wire form), equality of two separately decoded pods, a deep copy
(``copy.deepcopy``), and a copy with one change (the status phase): what each
model allows without copying everything (msgspec ``replace``, pydantic
``model_copy(update=...)`` on frozen models, dict copies along the path; the
official models are mutable, so a deep copy). Also whether a decode + encode
round trip gives back the same JSON, and the memory one decoded pod holds.
pydantic is optional: without it its row says "not installed".
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import sys
import tracemalloc
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (str(ROOT), str(ROOT / "src")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench._common import fixture_bytes, interleaved, machine, ratio_stats  # noqa: E402

OPS = ("decode", "encode", "equal", "deepcopy", "copy_change")


# --- pydantic models (only built when pydantic is installed) ---------------------------------


def pydantic_models() -> Any:
    """The pydantic v2 ``Pod`` model, or None when pydantic is not installed."""
    try:
        import pydantic
    except ImportError:
        return None
    from pydantic import BaseModel, ConfigDict
    from pydantic.alias_generators import to_camel

    class K8s(BaseModel):
        model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True)

    class ObjectMeta(K8s):
        name: str | None = None
        generate_name: str | None = None
        namespace: str | None = None
        uid: str | None = None
        resource_version: str | None = None
        generation: int | None = None
        creation_timestamp: datetime | None = None
        deletion_timestamp: datetime | None = None
        labels: dict[str, str] | None = None
        annotations: dict[str, str] | None = None
        owner_references: list[dict[str, Any]] | None = None
        managed_fields: list[dict[str, Any]] | None = None

    class Container(K8s):
        name: str
        image: str | None = None
        restart_policy: str | None = None

    class PodReadinessGate(K8s):
        condition_type: str

    class PodSpec(K8s):
        init_containers: list[Container] | None = None
        containers: list[Container] = []
        restart_policy: str | None = None
        node_name: str | None = None
        readiness_gates: list[PodReadinessGate] | None = None

    class PodCondition(K8s):
        type: str
        status: str
        last_probe_time: datetime | None = None
        last_transition_time: datetime | None = None
        reason: str | None = None
        message: str | None = None

    class StateWaiting(K8s):
        reason: str | None = None
        message: str | None = None

    class StateRunning(K8s):
        started_at: datetime | None = None

    class StateTerminated(K8s):
        exit_code: int = 0
        signal: int | None = None
        reason: str | None = None
        message: str | None = None
        started_at: datetime | None = None
        finished_at: datetime | None = None
        container_id: str | None = pydantic.Field(default=None, alias="containerID")

    class ContainerState(K8s):
        waiting: StateWaiting | None = None
        running: StateRunning | None = None
        terminated: StateTerminated | None = None

    class ContainerStatus(K8s):
        name: str
        state: ContainerState | None = None
        last_state: ContainerState | None = None
        ready: bool = False
        restart_count: int = 0
        image: str = ""
        image_id: str = pydantic.Field(default="", alias="imageID")
        container_id: str | None = pydantic.Field(default=None, alias="containerID")
        started: bool | None = None

    class IP(K8s):
        ip: str

    class PodStatus(K8s):
        phase: str | None = None
        conditions: list[PodCondition] | None = None
        message: str | None = None
        reason: str | None = None
        host_ip: str | None = pydantic.Field(default=None, alias="hostIP")
        host_ips: list[IP] | None = pydantic.Field(default=None, alias="hostIPs")
        pod_ip: str | None = pydantic.Field(default=None, alias="podIP")
        pod_ips: list[IP] | None = pydantic.Field(default=None, alias="podIPs")
        start_time: datetime | None = None
        init_container_statuses: list[ContainerStatus] | None = None
        container_statuses: list[ContainerStatus] | None = None
        qos_class: str | None = None

    class Pod(K8s):
        api_version: str | None = None
        kind: str | None = None
        metadata: ObjectMeta = ObjectMeta()
        spec: PodSpec = PodSpec()
        status: PodStatus = PodStatus()

    return Pod


# --- the cases -------------------------------------------------------------------------------


def cases() -> dict[str, dict[str, Any] | None]:
    """Per library: its five operations as thunks, plus a decode function (None: not installed)."""
    from kubernetes.client import ApiClient

    from podstatus.types import Pod

    raw = fixture_bytes()
    text = raw.decode()
    out: dict[str, dict[str, Any] | None] = {}

    a, b = Pod.from_json(raw), Pod.from_json(raw)
    out["msgspec (podstatus.types)"] = {
        "decode": lambda: Pod.from_json(raw),
        "encode": lambda: a.to_json(),
        "equal": lambda: a == b,
        "deepcopy": lambda: copy.deepcopy(a),
        "copy_change": lambda: a.replace(status=a.status.replace(phase="Failed")),
        "load": lambda: Pod.from_json(raw),
        "dump": lambda o: o.to_json(),
    }

    PydPod = pydantic_models()
    if PydPod is None:
        out["pydantic v2 (frozen, extra=allow)"] = None
    else:
        pa, pb = PydPod.model_validate_json(raw), PydPod.model_validate_json(raw)

        def pyd_dump(o: Any) -> bytes:
            return o.model_dump_json(by_alias=True, exclude_unset=True).encode()

        out["pydantic v2 (frozen, extra=allow)"] = {
            "decode": lambda: PydPod.model_validate_json(raw),
            "encode": lambda: pyd_dump(pa),
            "equal": lambda: pa == pb,
            "deepcopy": lambda: copy.deepcopy(pa),
            "copy_change": lambda: pa.model_copy(
                update={"status": pa.status.model_copy(update={"phase": "Failed"})}
            ),
            "load": lambda: PydPod.model_validate_json(raw),
            "dump": pyd_dump,
        }

    da, db = json.loads(raw), json.loads(raw)
    out["plain dicts (json, deepcopy)"] = {
        "decode": lambda: json.loads(raw),
        "encode": lambda: json.dumps(da, separators=(",", ":")).encode(),
        "equal": lambda: da == db,
        "deepcopy": lambda: copy.deepcopy(da),
        "copy_change": lambda: {**da, "status": {**da["status"], "phase": "Failed"}},
        "load": lambda: json.loads(raw),
        "dump": lambda o: json.dumps(o, separators=(",", ":")).encode(),
    }

    api = ApiClient()
    ka = api.deserialize(text, "V1Pod", "application/json")
    kb = api.deserialize(text, "V1Pod", "application/json")

    def k_dump(o: Any) -> bytes:
        return json.dumps(api.sanitize_for_serialization(o), separators=(",", ":")).encode()

    def k_change() -> Any:
        c = copy.deepcopy(ka)
        c.status.phase = "Failed"
        return c

    out["kubernetes (official V1Pod)"] = {
        "decode": lambda: api.deserialize(text, "V1Pod", "application/json"),
        "encode": lambda: k_dump(ka),
        "equal": lambda: ka == kb,
        "deepcopy": lambda: copy.deepcopy(ka),
        "copy_change": k_change,
        "load": lambda: api.deserialize(text, "V1Pod", "application/json"),
        "dump": k_dump,
    }
    return out


def _norm_times(value: Any) -> Any:
    # "2026-11-30T08:00:41+00:00" and "...Z" are the same instant; compare instants, not spellings.
    if isinstance(value, dict):
        return {k: _norm_times(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_norm_times(v) for v in value]
    if isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] == "T":
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return value
    return value


def round_trip(c: dict[str, Any]) -> str:
    """'exact', 'same instants' (timestamps spelled differently) or what was lost."""
    original = json.loads(fixture_bytes())
    back = json.loads(c["dump"](c["load"]()))
    if back == original:
        return "exact"
    if _norm_times(back) == _norm_times(original):
        return "same data, times respelled"
    lost = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in a:
                if k not in b:
                    lost.append(f"{path}.{k}")
                else:
                    walk(a[k], b[k], f"{path}.{k}")
        elif isinstance(a, list) and isinstance(b, list):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")

    walk(original, back, "")
    if not lost:
        return "differs"
    nulls = [p for p in lost if _get(original, p) is None]
    if len(nulls) == len(lost):
        return f"lossy: drops explicit nulls ({len(nulls)}, e.g. {nulls[0].lstrip('.')}: null)"
    return f"lossy: {len(lost)} fields lost, e.g. {', '.join(lost[:3])}"


def _get(doc: Any, path: str) -> Any:
    for part in path.lstrip(".").replace("[", ".[").split("."):
        doc = doc[int(part[1:-1])] if part.startswith("[") else doc[part]
    return doc


def memory_per_object(load: Any, n: int = 200) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    keep = [load() for _ in range(n)]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del keep
    return (after - before) / n


def run(repeats: int = 7, target: float = 0.05) -> dict[str, Any]:
    results: dict[str, Any] = {}
    all_cases = cases()
    thunks = {}
    for lib, c in all_cases.items():
        if c is None:
            continue
        for op in OPS:
            thunks[(lib, op)] = c[op]
    # Interleave every (library, operation) within each repeat.
    stats = interleaved({f"{lib}|{op}": fn for (lib, op), fn in thunks.items()}, repeats, target)
    ref = next(iter(all_cases))  # msgspec, our types: every ratio is to it, repeat by repeat
    for lib, c in all_cases.items():
        if c is None:
            results[lib] = None
            continue
        results[lib] = {
            "ops": {op: stats[f"{lib}|{op}"].as_dict(1e6) for op in OPS},
            "ratios": {op: ratio_stats(stats[f"{lib}|{op}"], stats[f"{ref}|{op}"]).median for op in OPS},
            "round_trip": round_trip(c),
            "bytes": memory_per_object(c["load"]),
        }
    return {"repeats": repeats, "libraries": results}


def _fmt(d: dict[str, float], ratio: float) -> str:
    m = d["median"]
    value = f"{m:.2f}" if m < 1 else f"{m:.1f}" if m < 100 else f"{m:,.0f}"
    times = f"{ratio:.2f}" if ratio < 1 else f"{ratio:.1f}" if ratio < 10 else f"{ratio:,.0f}"
    return f"{value} ±{d['spread'] * 50:.0f}% · {times}x"


def table_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for lib, r in result["libraries"].items():
        if r is None:
            rows.append([lib, *(["not installed"] * len(OPS)), "", ""])
            continue
        rows.append(
            [
                lib,
                *(_fmt(r["ops"][op], r["ratios"][op]) for op in OPS),
                f"{r['bytes'] / 1024:.0f} KB",
                r["round_trip"],
            ]
        )
    return rows


HEADER = [
    "library",
    "decode µs",
    "encode µs",
    "equal µs",
    "deepcopy µs",
    "copy + change µs",
    "memory/pod",
    "round trip",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write", metavar="PATH", help="update the table in this markdown file")
    args = parser.parse_args(argv)
    result = run(repeats=3, target=0.005) if args.quick else run(repeats=11)
    from rich.console import Console
    from rich.table import Table

    m = machine()
    table = Table(title="serialisation of the fixture pod: µs, medians ± half the spread · ratio to msgspec")
    for h in HEADER:
        table.add_column(h, overflow="fold")
    for row in table_rows(result):
        table.add_row(*row)
    Console(width=200).print(table)
    line = f"{m['cores']} cores, Python {m['python']}, " + ", ".join(
        f"{k} {v}" for k, v in m["versions"].items()
    )
    print(line)
    if args.write:
        md = ["| " + " | ".join(HEADER) + " |", "| --- |" + " ---: |" * (len(HEADER) - 2) + " --- |"]
        md += ["| " + " | ".join(row) + " |" for row in table_rows(result)]
        block = "\n".join(md) + (
            f"\n\nµs per operation, median ± half the spread over {result['repeats']} repeats "
            f"· the median ratio to msgspec within each repeat. Machine: {line}.\n"
        )
        path = Path(args.write)
        text = path.read_text() if path.exists() else ""
        start, end = "<!-- table -->", "<!-- /table -->"
        if start in text and end in text:
            head, _, rest = text.partition(start)
            _, _, tail = rest.partition(end)
            text = f"{head}{start}\n{block}{end}{tail}"
        else:
            text = f"{text}\n{start}\n{block}{end}\n"
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

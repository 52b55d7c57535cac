"""client-go v0.37.2, with its clientset's defaults (protobuf bodies), against the embedded server.

tests/clientgo is built once per source hash (clientgo_build.py; ~4 min cold, seconds warm).
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clientgo_build import build, go_binary, module_dir
from podstatus.server import EmbeddedApiServer, protobuf

pytestmark = [
    pytest.mark.timeout(1800),
    pytest.mark.skipif(go_binary() is None, reason="needs Go (/usr/local/go/bin/go) to build tests/clientgo"),
]

SCHEMA_COPY = Path(protobuf.__file__).resolve().parent.parent / "data" / "protobuf_schema.json"


@pytest.fixture(scope="module")
def clientgo() -> Path:
    binary, _seconds = build()
    return binary


@pytest.fixture(params=["plain", "tls+token"])
def server(request: pytest.FixtureRequest) -> Iterator[EmbeddedApiServer]:
    secure = request.param == "tls+token"
    with EmbeddedApiServer(token="t0ken" if secure else None, tls=secure) as srv:
        yield srv


def _run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120)


def test_clientgo_scenario_with_protobuf_defaults(
    clientgo: Path, server: EmbeddedApiServer, tmp_path: Path
) -> None:
    config = server.write_kubeconfig(tmp_path / "config")
    proc = _run(clientgo, "run", str(config))
    assert proc.returncode == 0, proc.stderr
    # The program itself checks that creates, updates and deletes went as protobuf.
    assert "POST application/vnd.kubernetes.protobuf" in proc.stdout
    assert "DELETE application/vnd.kubernetes.protobuf" in proc.stdout
    assert server.store.get("nodes", None, "clientgo-node").metadata["uid"]


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_decoder_round_trip_against_client_go_bytes(clientgo: Path) -> None:
    proc = _run(clientgo, "wire")
    assert proc.returncode == 0, proc.stderr
    samples = json.loads(proc.stdout)
    assert {s["name"] for s in samples} >= {"pod", "node", "deleteoptions", "eviction", "lease", "event"}
    for sample in samples:
        wire = base64.b64decode(sample["protobuf"])
        assert wire.startswith(protobuf.MAGIC)
        # client-go's JSON of the same object, less Go's nulls (zero times, nil slices).
        assert protobuf.decode(wire) == _without_nulls(sample["json"]), sample["name"]


def test_schema_copy_is_current(clientgo: Path) -> None:
    proc = _run(clientgo, "schema")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(SCHEMA_COPY.read_text()), (
        "regenerate: clientgo schema > src/podstatus/data/protobuf_schema.json"
    )


_PROTO_FIELD = re.compile(r"^\s*(?:optional|repeated)?\s*(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")


def _proto_messages(path: Path) -> dict[str, dict[str, int]]:
    """message name -> field name -> number, from a generated.proto (top-level messages)."""
    out: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in path.read_text().splitlines():
        if line.startswith("message "):
            current = out.setdefault(line.split()[1], {})
        elif line.startswith("}"):
            current = None
        elif current is not None and (m := _PROTO_FIELD.match(line)):
            current[m.group(1)] = int(m.group(2))
    return out


def test_schema_field_numbers_match_upstream_generated_proto(clientgo: Path) -> None:
    schema = json.loads(SCHEMA_COPY.read_text())
    dirs = {m: module_dir(m) for m in ("k8s.io/api", "k8s.io/apimachinery")}
    checked = 0
    protos: dict[Path, dict[str, dict[str, int]]] = {}
    for type_name, fields in schema["types"].items():
        package, message = type_name.rsplit(".", 1)
        module = next(m for m in dirs if package.startswith(m + "/"))
        proto = dirs[module] / package[len(module) + 1 :] / "generated.proto"
        if proto not in protos:
            protos[proto] = _proto_messages(proto)
        declared = protos[proto][message]
        for number, _json_name, _kind, _flags in fields.values():
            assert number in declared.values(), f"{type_name} field {number} not in {proto}"
            checked += 1
        assert len(declared) == len(fields), f"{type_name}: {sorted(declared)} vs schema {len(fields)} fields"
    assert checked > 500

#!/usr/bin/env python3
"""Regenerate ``src/podstatus/data/openapi.json.gz``: the OpenAPI documents the embedded server serves.

kube-apiserver serves ``/openapi/v3/<group-version>`` (what ``kubectl explain`` and ``kubectl
apply`` read) and ``/openapi/v2``. This file holds the same documents of Kubernetes itself
(``api/openapi-spec/v3/*.json`` and ``api/openapi-spec/swagger.json`` of the ``k8s.io/kubernetes``
Go module, the version pinned in ``go.mod`` beside this script), trimmed to what the embedded
server serves: the paths of the resources its discovery lists, every schema those paths reach
(with descriptions, as kubectl explain prints them), and only the media types it answers with
(no protobuf or CBOR answers). Gzipped: about 2 MB of JSON.

    python tests/apiserver/gen_openapi.py            # write the file
    python tests/apiserver/gen_openapi.py --check    # exit 1 when the file is stale

The Go module comes from the module cache (``go mod download k8s.io/kubernetes@VERSION`` fills
it); the served resources come from ``podstatus.server.discovery`` (src/ must be importable).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "src" / "podstatus" / "data" / "openapi.json.gz"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

from gen_schema import k8s_version, spec_dir  # noqa: E402

from podstatus.server import discovery  # noqa: E402

# What the server answers with (and reads: JSON, YAML, protobuf and the patch types).
_ANSWERS = {"application/json", "application/yaml", "application/json;stream=watch"}
_NOT_READ = {"application/cbor", "application/cbor-seq"}


def served() -> dict[str, set[str]]:
    """group/version ("v1" for core) -> the served resources and subresources ("pods/status")."""
    out: dict[str, set[str]] = {"v1": {r["name"] for r in discovery.api_resource_list()["resources"]}}
    for group in discovery.api_group_list()["groups"]:
        if group["name"] == "metrics.k8s.io":
            continue  # metrics-server's API: Kubernetes' documents have none of it
        for version in group["versions"]:
            listing = discovery.group_resource_list(group["name"], version["version"]) or {"resources": []}
            out[version["groupVersion"]] = {r["name"] for r in listing["resources"]}
    return out


def _resource_of(path: str) -> tuple[str, str] | None:
    """(group/version, resource[/subresource]) of an API path, or None for anything else."""
    parts = path.strip("/").split("/")
    if parts[:2] == ["api", "v1"]:
        gv, rest = "v1", parts[2:]
    elif parts[0] == "apis" and len(parts) >= 3:
        gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    if rest[:1] == ["watch"]:
        rest = rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[1] == "{namespace}":
        rest = rest[2:]
    if not rest or (len(rest) > 3 and rest[2] != "proxy"):  # .../proxy/{path} is nodes/proxy
        return None
    return gv, rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"


def _refs(value: Any, out: set[str]) -> None:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            out.add(ref)
        for item in value.values():
            _refs(item, out)
    elif isinstance(value, list):
        for item in value:
            _refs(item, out)


def _closure(start: Any, section: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The entries of ``section`` that ``start`` reaches through ``$ref``s ``prefix + name``."""
    kept: dict[str, Any] = {}
    todo: set[str] = set()
    _refs(start, todo)
    while todo:
        ref = todo.pop()
        if not ref.startswith(prefix):
            continue
        name = ref[len(prefix) :]
        if name in kept:
            continue
        kept[name] = section[name]
        _refs(section[name], todo)
    return dict(sorted(kept.items()))


def _media(value: Any, key: str) -> Any:
    """Drops the media types the server does not answer with (``content`` of responses) or read."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k == "content" and isinstance(v, dict):
                allowed = _ANSWERS if key == "responses" else None
                v = {m: s for m, s in v.items() if (m in allowed if allowed else m not in _NOT_READ)}
            elif k == "produces" and isinstance(v, list):
                v = [m for m in v if m in _ANSWERS]
            elif k == "consumes" and isinstance(v, list):
                v = [m for m in v if m not in _NOT_READ]
            out[k] = _media(v, k if k in ("responses", "requestBody") else key)
        return out
    if isinstance(value, list):
        return [_media(v, key) for v in value]
    return value


def _keep(path: str, wanted: dict[str, set[str]]) -> bool:
    found = _resource_of(path)
    return found is not None and found[1] in wanted.get(found[0], set())


def v3_documents(version: str, wanted: dict[str, set[str]]) -> dict[str, Any]:
    docs: dict[str, Any] = {}
    for gv in sorted(wanted):
        key = "api/v1" if gv == "v1" else f"apis/{gv}"
        source = json.loads((spec_dir(version) / (key.replace("/", "__") + "_openapi.json")).read_text())
        paths = {p: item for p, item in sorted(source["paths"].items()) if _keep(p, wanted)}
        paths = _media(paths, "")
        components = dict(source["components"])
        components["schemas"] = _closure(paths, source["components"]["schemas"], "#/components/schemas/")
        docs[key] = {
            "openapi": source["openapi"],
            "info": source["info"],
            "paths": paths,
            "components": components,
        }
    return docs


def v2_document(version: str, wanted: dict[str, set[str]]) -> dict[str, Any]:
    source = json.loads((spec_dir(version).parent / "swagger.json").read_text())
    paths = _media({p: item for p, item in sorted(source["paths"].items()) if _keep(p, wanted)}, "")
    parameters = _closure(paths, source["parameters"], "#/parameters/")
    definitions = _closure([paths, parameters], source["definitions"], "#/definitions/")
    return {**source, "paths": paths, "parameters": parameters, "definitions": definitions}


def build() -> dict[str, Any]:
    version = k8s_version()
    wanted = served()
    return {
        "kubernetes": f"v{version}",
        "v3": v3_documents(version, wanted),
        "v2": v2_document(version, wanted),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the file is current")
    args = parser.parse_args()
    data = build()
    if args.check:
        # The JSON is compared, not the gzip bytes (zlib versions may compress differently).
        current = json.loads(gzip.decompress(OUT.read_bytes())) if OUT.exists() else None
        if current != data:
            print(f"{OUT} is stale: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    text = json.dumps(data, sort_keys=False, separators=(",", ":")).encode()
    OUT.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(text)} bytes of JSON)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

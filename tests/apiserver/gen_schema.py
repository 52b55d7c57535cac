#!/usr/bin/env python3
"""Regenerate ``src/podstatus/data/apischema.json``: which fields kube-apiserver knows, and their types.

The embedded server's ``fieldValidation`` (unknown fields) and its int32/int64 range checks read
that file (its OpenAPI documents come from ``gen_openapi.py``). It is derived from the OpenAPI v3 documents of
Kubernetes (``api/openapi-spec/v3`` of the ``k8s.io/kubernetes`` Go module, the version pinned in
``go.mod`` beside this script), keeping only the types reachable from the served kinds, and for
each property only its type: a scalar name, ``{"ref": T}``, ``{"array": S}`` or ``{"map": S}``.

    python tests/apiserver/gen_schema.py            # write the file
    python tests/apiserver/gen_schema.py --check    # exit 1 when the file is stale

The Go module comes from the module cache (``go mod download k8s.io/kubernetes@VERSION`` fills it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "src" / "podstatus" / "data" / "apischema.json"

# (apiVersion, kind) -> OpenAPI document file and schema name, for every kind the server may serve.
ROOTS = {
    "v1/Pod": ("api__v1_openapi.json", "io.k8s.api.core.v1.Pod"),
    "v1/Node": ("api__v1_openapi.json", "io.k8s.api.core.v1.Node"),
    "v1/Namespace": ("api__v1_openapi.json", "io.k8s.api.core.v1.Namespace"),
    "v1/Binding": ("api__v1_openapi.json", "io.k8s.api.core.v1.Binding"),
    "v1/Event": ("api__v1_openapi.json", "io.k8s.api.core.v1.Event"),
    "v1/DeleteOptions": ("api__v1_openapi.json", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"),
    "coordination.k8s.io/v1/Lease": (
        "apis__coordination.k8s.io__v1_openapi.json",
        "io.k8s.api.coordination.v1.Lease",
    ),
    "events.k8s.io/v1/Event": ("apis__events.k8s.io__v1_openapi.json", "io.k8s.api.events.v1.Event"),
}

# Types with their own JSON form (not objects with properties).
SPECIAL = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "date-time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "date-time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": "any",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "any",
}


def k8s_version() -> str:
    text = (HERE / "go.mod").read_text()
    match = re.search(r"k8s\.io/kubernetes v(\d+\.\d+\.\d+)", text)
    if not match:
        raise SystemExit("go.mod names no k8s.io/kubernetes version")
    return match.group(1)


def spec_dir(version: str) -> Path:
    modcache = (
        os.environ.get("GOMODCACHE")
        or subprocess.run(
            ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=False
        ).stdout.strip()
        or str(Path.home() / "go" / "pkg" / "mod")
    )
    path = Path(modcache) / "k8s.io" / f"kubernetes@v{version}" / "api" / "openapi-spec" / "v3"
    if not path.is_dir():
        raise SystemExit(f"{path} is missing: run `go mod download k8s.io/kubernetes@v{version}`")
    return path


def ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_of(prop: dict[str, Any], wanted: list[str]) -> Any:
    if "allOf" in prop and len(prop["allOf"]) == 1:
        prop = prop["allOf"][0]
    if "$ref" in prop:
        name = ref_name(prop["$ref"])
        if name in SPECIAL:
            return SPECIAL[name]
        wanted.append(name)
        return {"ref": name}
    kind = prop.get("type")
    if kind == "array":
        return {"array": type_of(prop["items"], wanted)}
    if kind == "object":
        extra = prop.get("additionalProperties")
        if isinstance(extra, dict):
            return {"map": type_of(extra, wanted)}
        return "any"
    if kind == "integer":
        return prop.get("format") or "int64"
    if kind in ("string", "boolean", "number"):
        return kind
    return "any"


def build(version: str) -> dict[str, Any]:
    docs: dict[str, dict[str, Any]] = {}
    types: dict[str, Any] = {}
    for file, root in ROOTS.values():
        if file not in docs:
            docs[file] = json.loads((spec_dir(version) / file).read_text())["components"]["schemas"]
        schemas = docs[file]
        wanted = [root]
        while wanted:
            name = wanted.pop()
            if name in types or name in SPECIAL:
                continue
            schema = schemas[name]
            props = {
                key: type_of(value, wanted) for key, value in sorted(schema.get("properties", {}).items())
            }
            entry: dict[str, Any] = {"properties": props}
            if schema.get("required"):
                entry["required"] = sorted(schema["required"])
            types[name] = entry
    return {
        "kubernetes": f"v{version}",
        "kinds": {key: root for key, (_, root) in sorted(ROOTS.items())},
        "types": dict(sorted(types.items())),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the file is current")
    args = parser.parse_args()
    text = json.dumps(build(k8s_version()), indent=1, sort_keys=False) + "\n"
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

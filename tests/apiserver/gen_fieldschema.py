"""Regenerate src/podstatus/server/fieldmanager/fieldschema.py from the OpenAPI v3 documents of k8s.io/kubernetes.

Run after the apiserver module is downloaded (``tests/apiserver/start --build-only``)::

    python tests/apiserver/gen_fieldschema.py > src/podstatus/server/fieldmanager/fieldschema.py

It keeps only what server-side apply needs: associative lists (keys and key defaults),
sets, and atomic structs/maps, per field path of each served kind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

VERSION = "v1.37.2"
KINDS = {
    "Pod": "io.k8s.api.core.v1.Pod",
    "Node": "io.k8s.api.core.v1.Node",
    "Namespace": "io.k8s.api.core.v1.Namespace",
    "Event": "io.k8s.api.core.v1.Event",
    "coordination.k8s.io/Lease": "io.k8s.api.coordination.v1.Lease",
    "events.k8s.io/Event": "io.k8s.api.events.v1.Event",
}
DOCS = ("api__v1", "apis__coordination.k8s.io__v1", "apis__events.k8s.io__v1")


def _ref(s: dict[str, Any]) -> str | None:
    if "$ref" in s:
        return str(s["$ref"]).rsplit("/", 1)[-1]
    if "allOf" in s:
        return _ref(s["allOf"][0])
    return None


def _walk(
    schemas: dict[str, Any],
    name: str,
    path: tuple[str, ...],
    seen: frozenset[str],
    lists: dict[tuple[str, ...], Any],
    atomic: set[tuple[str, ...]],
) -> None:
    s = schemas[name]
    if s.get("x-kubernetes-map-type") == "atomic":
        atomic.add(path)
        return
    for key, prop in (s.get("properties") or {}).items():
        sub = (*path, key)
        if path == ("metadata",) and key == "managedFields":
            continue
        if prop.get("type") == "array":
            kind = prop.get("x-kubernetes-list-type")
            item = _ref(prop.get("items", {}))
            if kind == "map":
                keys = tuple(prop["x-kubernetes-list-map-keys"])
                fields = schemas[item].get("properties", {}) if item else {}
                defaults = {k: fields[k]["default"] for k in keys if "default" in fields.get(k, {})}
                lists[sub] = ("map", keys, defaults) if defaults else ("map", keys)
                if item and item not in seen:
                    _walk(schemas, item, sub, seen | {item}, lists, atomic)
            elif kind == "set":
                lists[sub] = "set"
        elif prop.get("type") == "object" and "additionalProperties" in prop:
            if prop.get("x-kubernetes-map-type") == "atomic":
                atomic.add(sub)
        else:
            ref = _ref(prop)
            if ref and schemas[ref].get("x-kubernetes-map-type") == "atomic":
                atomic.add(sub)
            elif ref and ref not in seen and "properties" in schemas[ref]:
                _walk(schemas, ref, sub, seen | {ref}, lists, atomic)


def main() -> None:
    gomod = subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    base = Path(gomod) / f"k8s.io/kubernetes@{VERSION}/api/openapi-spec/v3"
    schemas: dict[str, Any] = {}
    for doc in DOCS:
        schemas.update(json.loads((base / f"{doc}_openapi.json").read_text())["components"]["schemas"])
    out = sys.stdout
    out.write(
        '"""List and map types of the served kinds, for server-side apply (generated: do not edit).\n\n'
    )
    out.write(
        "Made by tests/apiserver/gen_fieldschema.py from the OpenAPI v3 documents of k8s.io/kubernetes\n"
    )
    out.write(f"{VERSION}: associative lists (keys, key defaults), sets, and atomic structs and maps\n")
    out.write("(an associative list whose items are atomic is in both). Lists not named here are atomic.\n")
    out.write('"""\n\nfrom __future__ import annotations\n\nfrom typing import Any\n\n')
    out.write("LISTS: dict[str, dict[tuple[str, ...], Any]] = {\n")
    atomics: dict[str, set[tuple[str, ...]]] = {}
    for kind, name in KINDS.items():
        lists: dict[tuple[str, ...], Any] = {}
        atomic: set[tuple[str, ...]] = set()
        _walk(schemas, name, (), frozenset({name}), lists, atomic)
        atomics[kind] = atomic
        out.write(f"    {kind!r}: {{\n")
        for path in sorted(lists):
            out.write(f"        {path!r}: {lists[path]!r},\n")
        out.write("    },\n")
    out.write("}\n\nATOMIC: dict[str, frozenset[tuple[str, ...]]] = {\n")
    for kind, atomic in atomics.items():
        out.write(f"    {kind!r}: frozenset({{\n")
        for path in sorted(atomic):
            out.write(f"        {path!r},\n")
        out.write("    }),\n")
    out.write("}\n")


if __name__ == "__main__":
    main()

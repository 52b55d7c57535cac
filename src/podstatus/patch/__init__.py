"""Patches over plain JSON dicts: strategic merge (diff and apply), JSON merge, JSON patch.

Everything here is pure: no I/O and no dependency on other podstatus modules, so the
rules can be tested, and trusted, without a server. Inputs are never mutated.

The strategic merge patch code follows ``k8s.io/apimachinery/pkg/util/strategicpatch``
(v0.37) closely, including its less obvious choices, because patches we send must mean
to a real API server exactly what they mean to us, and the embedded API server must
answer like a real one:

- Without ``$setElementOrder``, merged lists are ordered "patch items first": items
  named by the patch keep the patch's order and server-only items are slotted in before
  the first patch item they preceded in the original. So a new element (or finalizer)
  sent alone ends up at the *front* of the list, as it does on a real server.
- ``{"$patch": "delete"}`` on a map leaves an empty map, not a missing field.
- A value for a field the original lacks is taken as is, minus nulls and minus any map
  carrying a ``$patch`` directive (``removeDirectives``).

One concept per module: :mod:`.values` (decoded JSON as Go compares it),
:mod:`.lists` (the Pod's merge keys, the directives, list-element order),
:mod:`.strategic_diff` (the manager's status patch), :mod:`.strategic_apply` (the
server's and the fake client's apply), :mod:`.jsonpatch` (RFC 7386 and RFC 6902).
The manager, the embedded server and the fake client use the names below, from here.
"""

from __future__ import annotations

from .jsonpatch import apply_json_merge_patch, apply_json_patch
from .lists import POD_MERGE_KEYS, POD_RETAIN_KEYS_LISTS
from .strategic_apply import apply_strategic_merge_patch
from .strategic_diff import diff_pod_status, has_changes
from .values import PatchError, encode_patch

__all__ = [
    "POD_MERGE_KEYS",
    "POD_RETAIN_KEYS_LISTS",
    "PatchError",
    "apply_json_merge_patch",
    "apply_json_patch",
    "apply_strategic_merge_patch",
    "diff_pod_status",
    "encode_patch",
    "has_changes",
]

"""The promises of SPEC section 7, checked on every write and every watch event of a simulation."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..conditions import is_terminal_phase
from ..types import Pod
from ..validation import check_container_state_transition


@dataclass
class Invariant:
    name: str
    checked: int = 0
    violations: int = 0
    examples: list[str] = field(default_factory=list)

    def check(self, ok: bool, detail: Callable[[], str]) -> None:
        self.checked += 1
        if not ok:
            self.violations += 1
            if len(self.examples) < 5:
                self.examples.append(detail())


class InvariantChecker:
    """Watches every write and every watch event for the promises of SPEC section 7."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.wrong_uid = Invariant("no write to a pod with another UID")
        self.terminal_undone = Invariant("no terminal phase undone on the server")
        self.illegal_transition = Invariant("no illegal container transition on the server")
        self.early_delete = Invariant("no delete before the pod is terminal on the server")
        self._last: dict[str, Pod] = {}
        # (namespace, name) -> the UIDs the simulation knows to be that pod's, by time.
        self.owner_uid: dict[tuple[str, str], str] = {}

    def all(self) -> list[Invariant]:
        return [self.wrong_uid, self.terminal_undone, self.illegal_transition, self.early_delete]

    def ok(self) -> bool:
        return all(i.violations == 0 for i in self.all())

    def observe_write(self, namespace: str, name: str, patch: bytes, result: Pod) -> None:
        precondition = (msgspec.json.decode(patch).get("metadata") or {}).get("uid")
        with self._lock:
            self.wrong_uid.check(
                precondition is not None and precondition == result.uid,
                lambda: f"{namespace}/{name}: patch for UID {precondition} landed on {result.uid}",
            )
        self.observe_event("MODIFIED", result)

    def observe_delete(self, namespace: str, name: str, uid: str) -> None:
        """A final delete (grace 0) succeeded: the pod must have been terminal on the server."""
        with self._lock:
            last = self._last.get(uid)
            self.early_delete.check(
                last is not None and is_terminal_phase(last.status.phase),
                lambda: f"{namespace}/{name}: deleted while {last.status.phase if last else 'unseen'}",
            )

    def observe_event(self, kind: str, pod: Pod) -> None:
        if kind not in ("ADDED", "MODIFIED"):
            return
        with self._lock:
            before = self._last.get(pod.uid)
            if before is not None:
                rv_new, rv_old = pod.metadata.resource_version or "", before.metadata.resource_version or ""
                if rv_new.isdigit() and rv_old.isdigit() and int(rv_new) < int(rv_old):
                    return  # an older copy (a write's answer racing the watch)
                self.terminal_undone.check(
                    not (is_terminal_phase(before.status.phase) and not is_terminal_phase(pod.status.phase)),
                    lambda: f"{pod.key()}: {before.status.phase} -> {pod.status.phase}",
                )
                self.illegal_transition.check(
                    _legal_transition(before, pod), lambda: f"{pod.key()}: container left terminated state"
                )
            self._last[pod.uid] = pod


def _legal_transition(before: Pod, after: Pod) -> bool:
    # The same rule the manager applies before caching (SPEC 4.2 step 2), here to what the server holds.
    return check_container_state_transition(before.status, after.status, after.spec) is None


class CheckedClient:
    """Wraps a client: every status write and delete passes the invariant checker."""

    def __init__(self, inner: Any, checker: InvariantChecker) -> None:
        self._inner = inner
        self._checker = checker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def patch_pod_status(self, namespace: str, name: str, patch: bytes, **kwargs: Any) -> Pod:
        result: Pod = self._inner.patch_pod_status(namespace, name, patch, **kwargs)
        self._checker.observe_write(namespace, name, patch, result)
        return result

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None, uid: str | None
    ) -> None:
        self._inner.delete_pod(namespace, name, grace_period_seconds=grace_period_seconds, uid=uid)
        if grace_period_seconds == 0 and uid is not None:
            self._checker.observe_delete(namespace, name, uid)

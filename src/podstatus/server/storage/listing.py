"""Paged lists as kube-apiserver pages them: :class:`ListPage`, continue tokens, 410 Expired."""

from __future__ import annotations

import base64
import json

from ...errors import BadRequestError, GoneError, status_body
from .errors import bad_request
from .objects import Stored
from .strategy import ResourceInfo

__all__ = ["ListPage", "continue_expired", "decode_continue", "encode_continue", "expired", "list_expired",
           "list_key"]  # fmt: skip


class ListPage:
    """One page of a list: items, the list's resourceVersion, the continue token (``""`` on the
    last page) and, when known, how many items are left after this page."""

    __slots__ = ("continue_token", "items", "remaining", "rv")

    def __init__(
        self, items: list[Stored], rv: int, continue_token: str = "", remaining: int | None = None
    ) -> None:
        self.items = items
        self.rv = rv
        self.continue_token = continue_token
        self.remaining = remaining


def list_key(info: ResourceInfo, stored: Stored) -> tuple[str, str]:
    ns = stored.namespace if info.namespaced else ""
    return ns, stored.name


def _token_prefix(info: ResourceInfo, namespace: str | None) -> bool:
    """Whether the list's keys carry the namespace (a list of a namespaced kind in all namespaces)."""
    return info.namespaced and not namespace


def encode_continue(info: ResourceInfo, namespace: str | None, start: tuple[str, str], rv: int) -> str:
    """A continue token in the real server's encoding (base64url of ``{"v","rv","start"}``),
    so clients that look inside (few do) see what they expect."""
    key = f"{start[0]}/{start[1]}" if _token_prefix(info, namespace) else start[1]
    data = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def _bad_continue(why: str) -> BadRequestError:
    return bad_request(f"invalid continue token: continue key is not valid{why}")


def _go_base64_error(token: str) -> str | None:
    """Go's RawURLEncoding error for ``token`` (None when it decodes)."""
    for i, ch in enumerate(token):
        if not (ch.isascii() and (ch.isalnum() or ch in "-_")):
            return f"illegal base64 data at input byte {i}"
    if len(token) % 4 == 1:
        return f"illegal base64 data at input byte {len(token) - 1}"
    return None


def decode_continue(token: str, info: ResourceInfo, namespace: str | None) -> tuple[tuple[str, str], int]:
    """The start key and resourceVersion of a continue token; 400 with the real server's
    words when it is not one."""
    err = _go_base64_error(token)
    if err:
        raise _bad_continue(f": {err}")
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _bad_continue(f": {exc}") from None
    if not isinstance(data, dict):
        raise _bad_continue(": json: cannot unmarshal into a continue token")
    version = data.get("v")
    if version != "meta.k8s.io/v1":
        raise _bad_continue(f": server does not recognize this encoded version {version or ''}")
    rv = data.get("rv")
    if not isinstance(rv, int) or isinstance(rv, bool) or rv == 0:
        raise _bad_continue(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    key = data.get("start")
    if not isinstance(key, str) or not key:
        raise _bad_continue(": encoded start key empty (version meta.k8s.io/v1)")
    # Path traversal out of the list's prefix is refused, as upstream does (path.Clean must not change it).
    parts = key.lstrip("/").split("/")
    if any(p in ("", ".", "..") for p in parts[:-1]) or parts[-1] in (".", ".."):
        raise _bad_continue(f": {key}")
    if _token_prefix(info, namespace):
        ns, _, name = key.lstrip("/").partition("/")
        return (ns, name), rv
    return ("" if not info.namespaced else namespace or "", key.lstrip("/")), rv


_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a "
    "new list without the continue parameter, or use the continue token in this response to retrieve "
    "the remainder of the results. Continuing with the provided token results in an inconsistent list "
    "- objects that were created, modified, or deleted between the time the first chunk was returned "
    "and now may show up in the list."
)


def list_expired() -> GoneError:
    message = "The resourceVersion for the provided list is too old."
    return GoneError(message, status=status_body(410, "Expired", message))


def continue_expired(info: ResourceInfo, namespace: str | None, start: tuple[str, str] | None) -> GoneError:
    """410 Expired for a token older than the history, with a token (rv -1: the current state)
    that goes on where the old one stopped."""
    status = status_body(410, "Expired", _CONTINUE_EXPIRED)
    if start is not None:
        status["metadata"] = {"continue": encode_continue(info, namespace, start, -1)}
    return GoneError(_CONTINUE_EXPIRED, status=status)


def expired(rv: int, lowest: int) -> GoneError:
    """410 Expired for a watch from ``rv``; ``lowest``: the oldest resourceVersion a watch may still
    start from (the number kube-apiserver's watch cache puts in brackets, its oldest event's - 1)."""
    message = f"too old resource version: {rv} ({lowest})"
    return GoneError(message, status=status_body(410, "Expired", message))

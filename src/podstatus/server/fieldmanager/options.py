"""The field manager's request options: who manages a write (``?fieldManager=`` or the user
agent) and whether the name is one kube-apiserver accepts, with its words."""

from __future__ import annotations

import unicodedata

from ...errors import UnprocessableEntityError, status_body

__all__ = ["FIELD_MANAGER_MAX_LENGTH", "manager_or_user_agent", "validate_field_manager"]

# The longest field manager name kube-apiserver accepts (bytes).
FIELD_MANAGER_MAX_LENGTH = 128


def manager_or_user_agent(field_manager: str | None, user_agent: str) -> str:
    """The manager of an update: ``?fieldManager=``, else the user agent up to its first ``/``
    (printable characters only, at most 128 bytes), as kube-apiserver derives it."""
    if field_manager:
        return field_manager
    out = ""
    size = 0
    for ch in user_agent.split("/", 1)[0]:
        if not ch.isprintable():
            continue
        n = len(ch.encode())
        if size + n > FIELD_MANAGER_MAX_LENGTH:
            break
        out += ch
        size += n
    return out


_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}


def validate_field_manager(method: str, field_manager: str | None, *, apply: bool, force: str | None) -> None:
    """The checks of ValidateCreate/Update/PatchOptions on ``fieldManager`` and ``force``:
    422 Invalid of ``<Kind>Options.meta.k8s.io ""``."""
    errors: list[tuple[str, str, str]] = []  # (field, reason, text)
    manager = field_manager or ""
    if method == "PATCH":
        if apply and not manager:
            errors.append(
                ("fieldManager", "FieldValueRequired", "Required value: is required for apply patch")
            )
        if not apply and force is not None:
            errors.append(
                ("force", "FieldValueForbidden", "Forbidden: may not be specified for non-apply patch")
            )
    if len(manager.encode()) > FIELD_MANAGER_MAX_LENGTH:
        errors.append(
            (
                "fieldManager",
                "FieldValueTooLong",
                f"Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes",
            )
        )
    for i, ch in enumerate(manager):
        if not ch.isprintable():
            errors.append(("fieldManager", "FieldValueInvalid",
                           f"Invalid value: {_go_quote(manager)}: invalid character {_go_rune(ch)} (at position {i})"))  # fmt: skip
    if not errors:
        return
    kind = _OPTIONS_KIND.get(method, "PatchOptions")
    texts = [f"{f}: {t}" for f, _, t in errors]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    message = f'{kind}.meta.k8s.io "" is invalid: {joined}'
    causes = [{"reason": r, "message": t, "field": f} for f, r, t in errors]
    body = status_body(422, "Invalid", message, group="meta.k8s.io", kind=kind, causes=causes)
    raise UnprocessableEntityError(message, status=body)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", "\\": "\\\\", '"': '\\"'}  # fmt: skip


def _go_quote(text: str) -> str:
    """Go's strconv.Quote (how field errors print a string value)."""
    out = []
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _go_rune(ch: str) -> str:
    # Go's %#U: U+0007 plus the character when printable (never here).
    name = f"U+{ord(ch):04X}"
    return name if not unicodedata.category(ch).startswith("L") else f"{name} '{ch}'"

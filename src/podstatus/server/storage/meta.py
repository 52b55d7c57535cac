"""ObjectMeta rules every kind shares: names, labels, annotations, the fields only the server sets, times.

The messages are those of k8s.io/apimachinery's validation (kube-apiserver v1.37.2).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ...validation import qualified_name_errors
from .errors import FieldError

__all__ = [
    "DNS1123_LABEL",
    "LABEL_MSG",
    "MAX_ANNOTATIONS_BYTES",
    "MAX_TIMESTAMP",
    "SERVER_META",
    "check_label_name",
    "check_labels",
    "check_subdomain",
    "parse_rfc3339",
    "qualified_name_errors",
    "rfc3339",
]

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
# TotalAnnotationSizeLimitB of kube-apiserver.
MAX_ANNOTATIONS_BYTES = 256 * 1024


def check_subdomain(value: str, field: str, errors: list[FieldError]) -> None:
    if len(value) > 253:
        errors.append(FieldError(field, "Invalid value", value, "must be no more than 253 characters"))
    elif not DNS1123_SUBDOMAIN.match(value):
        errors.append(FieldError(field, "Invalid value", value, SUBDOMAIN_MSG))


def check_label_name(value: str, field: str, errors: list[FieldError]) -> None:
    if len(value) > 63:
        errors.append(FieldError(field, "Invalid value", value, "must be no more than 63 characters"))
    elif not DNS1123_LABEL.match(value):
        errors.append(FieldError(field, "Invalid value", value, LABEL_MSG))


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def check_labels(meta: dict[str, Any], errors: list[FieldError]) -> None:
    """ValidateLabels and the key check of ValidateAnnotations (field ``metadata.labels`` / ``.annotations``)."""
    labels = meta.get("labels")
    for key, value in labels.items() if isinstance(labels, dict) else ():
        for msg in qualified_name_errors(str(key)):
            errors.append(FieldError("metadata.labels", "Invalid value", key, msg))
        text = value if isinstance(value, str) else ""
        if len(text.encode()) > 63:
            errors.append(
                FieldError("metadata.labels", "Invalid value", text, "must be no more than 63 bytes")
            )
        if not _LABEL_VALUE.match(text):
            errors.append(FieldError("metadata.labels", "Invalid value", text, _LABEL_VALUE_MSG))
    annotations = meta.get("annotations")
    for key in annotations if isinstance(annotations, dict) else ():
        for msg in qualified_name_errors(str(key).lower()):
            errors.append(FieldError("metadata.annotations", "Invalid value", key, msg))
    if isinstance(annotations, dict):
        # ValidateAnnotationsSize: keys and values together, in bytes.
        size = sum(
            len(str(k).encode()) + len(v.encode() if isinstance(v, str) else b"")
            for k, v in annotations.items()
        )
        if size > MAX_ANNOTATIONS_BYTES:
            errors.append(
                FieldError(
                    "metadata.annotations",
                    "Too long",
                    detail=f"may not be more than {MAX_ANNOTATIONS_BYTES} bytes",
                )
            )


# Metadata only the server sets: an update keeps the stored values.
SERVER_META = (
    "name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation",
    "resourceVersion", "managedFields",
)  # fmt: skip


# 9999-12-31T23:59:59Z: the last instant RFC 3339 (and Python's datetime) can write.
MAX_TIMESTAMP = 253402300799.0


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except (TypeError, ValueError):
        return 0.0

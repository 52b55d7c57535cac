"""Structured log lines of the node agent: a message and fields, as the status manager writes them.

The text is ``message k=v k=v`` (logfmt-like, for people); the fields also go
in the record as ``podstatus`` (for ``--log-format json`` and log shippers).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["log_fields"]


def log_fields(logger: logging.Logger, level: int, message: str, **fields: Any) -> None:
    if logger.isEnabledFor(level):
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        logger.log(level, "%s %s", message, text, extra={"podstatus": fields})

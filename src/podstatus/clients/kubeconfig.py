"""Connection settings for real clusters, loaded by the official ``kubernetes`` package.

Credentials are never parsed here: kubeconfig files (``KUBECONFIG`` lists included),
in-cluster service accounts, exec credential plugins and expiring tokens are all
handled by ``kubernetes.config``, which fills a ``kubernetes.client.Configuration``.
This module only reads the result (:func:`settings_from_configuration`) and keeps the
``Authorization`` header fresh (:class:`ConfigAuth`).

``kubernetes`` is imported lazily: building an :class:`~podstatus.clients.http.HttpKubeClient`
from a URL and a token does not pay for importing it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import urllib3

__all__ = [
    "ConfigAuth",
    "ConnectionSettings",
    "load_in_cluster_configuration",
    "load_kubeconfig_configuration",
    "settings_from_configuration",
]

logger = logging.getLogger(__name__)

# A ``kubernetes.client.Configuration`` (typed loosely: the package has no type hints).
Configuration = Any


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """Where the API server is and how to reach it (everything but the credentials' value)."""

    base_url: str
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    proxy_headers: dict[str, str] | None = None


def load_kubeconfig_configuration(
    path: str | os.PathLike[str] | None = None, context: str | None = None
) -> Configuration:
    """A fresh ``Configuration`` from a kubeconfig: ``path``, else ``$KUBECONFIG``, else ``~/.kube/config``.

    ``$KUBECONFIG`` is read now (the ``kubernetes`` package reads it once, at import) and
    may list several files separated by ``os.pathsep``; they are merged as kubectl does.
    """
    from kubernetes import client, config

    if path is None:
        path = os.environ.get("KUBECONFIG") or os.path.join("~", ".kube", "config")
    cfg = client.Configuration()
    config.load_kube_config(
        config_file=os.fspath(path), context=context, client_configuration=cfg, persist_config=False
    )
    return cfg


def load_in_cluster_configuration() -> Configuration:
    """A fresh ``Configuration`` from the pod's service account (raises ``ConfigException`` outside a pod)."""
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_incluster_config(client_configuration=cfg)
    return cfg


def settings_from_configuration(cfg: Configuration) -> ConnectionSettings:
    """Read host, TLS and proxy settings from a ``kubernetes.client.Configuration``."""
    proxy_headers = getattr(cfg, "proxy_headers", None)
    return ConnectionSettings(
        base_url=str(cfg.host).rstrip("/"),
        ca_cert=cfg.ssl_ca_cert or None,
        client_cert=cfg.cert_file or None,
        client_key=cfg.key_file or None,
        verify=bool(cfg.verify_ssl),
        tls_server_name=getattr(cfg, "tls_server_name", None) or None,
        proxy=cfg.proxy or None,
        proxy_headers=dict(proxy_headers) if proxy_headers else None,
    )


def authorization_from_configuration(cfg: Configuration) -> str | None:
    """The ``Authorization`` header value a ``Configuration`` holds, without calling its refresh hook."""
    api_key: dict[str, str] = cfg.api_key or {}
    prefixes: dict[str, str] = cfg.api_key_prefix or {}
    for ident in ("BearerToken", "authorization"):
        key = api_key.get(ident)
        if key:
            prefix = prefixes.get(ident)
            value = f"{prefix} {key}" if prefix else str(key)
            # A bare token (no scheme) is a bearer token.
            return value if " " in value.strip() else f"Bearer {value.strip()}"
    if cfg.username or cfg.password:
        header: str = urllib3.util.make_headers(basic_auth=f"{cfg.username or ''}:{cfg.password or ''}")[
            "authorization"
        ]
        return header
    return None


class ConfigAuth:
    """The ``Authorization`` header from a ``Configuration``, kept fresh cheaply and thread-safely.

    - ``refresh_api_key_hook`` (set by the loaders for exec plugins, expiring tokens and
      rotated service-account tokens) is called at most every ``refresh_interval`` seconds,
      not on every request;
    - after a 401, :meth:`after_unauthorized` reloads the whole configuration (``reload``:
      that re-runs exec plugins and re-reads token files even when nothing looked expired)
      and tells whether the header changed, so the caller can retry once.
    """

    def __init__(
        self,
        cfg: Configuration,
        *,
        reload: Callable[[], Configuration] | None = None,
        refresh_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cfg = cfg
        self._reload = reload
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._value = authorization_from_configuration(cfg)
        self._checked_at = clock()
        self._reloaded_at = float("-inf")
        # Set when a reload changed the TLS client certificate (exec plugins may hand out certificates).
        self.settings_changed: Callable[[ConnectionSettings], None] | None = None

    @property
    def configuration(self) -> Configuration:
        return self._cfg

    def header(self) -> str | None:
        """The current header value (``None``: send none)."""
        hook = self._cfg.refresh_api_key_hook
        if hook is None or self._clock() - self._checked_at < self._refresh_interval:
            return self._value
        with self._lock:
            if self._clock() - self._checked_at >= self._refresh_interval:
                try:
                    hook(self._cfg)
                except Exception:
                    logger.warning("refreshing the API credentials failed", exc_info=True)
                self._value = authorization_from_configuration(self._cfg)
                self._checked_at = self._clock()
            return self._value

    def after_unauthorized(self, sent: str | None) -> tuple[bool, str | None]:
        """After a 401 for a request sent with ``sent``: ``(retry, header to retry with)``.

        ``retry`` is false when nothing changed (retrying would get the same 401).
        """
        with self._lock:
            if self._value != sent:
                # Another thread refreshed meanwhile.
                return True, self._value
            if self._reload is None or self._clock() - self._reloaded_at < 1.0:
                return False, sent
            self._reloaded_at = self._clock()
            try:
                cfg = self._reload()
            except Exception:
                logger.warning("reloading the API credentials after a 401 failed", exc_info=True)
                return False, sent
            old_settings = settings_from_configuration(self._cfg)
            new_settings = settings_from_configuration(cfg)
            self._cfg = cfg
            self._value = authorization_from_configuration(cfg)
            self._checked_at = self._clock()
            changed = self._value != sent
            if new_settings != old_settings and self.settings_changed is not None:
                self.settings_changed(new_settings)
                changed = True
            logger.debug("reloaded API credentials after a 401", extra={"changed": changed})
            return changed, self._value

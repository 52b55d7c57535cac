"""Connection settings for real clusters, loaded by the official ``kubernetes`` package.

Credentials are never parsed here: kubeconfig files (``KUBECONFIG`` lists included),
in-cluster service accounts, exec credential plugins and expiring tokens are all
handled by ``kubernetes.config``, which fills a ``kubernetes.client.Configuration``.
This module only reads the result (:func:`settings_from_configuration`) and keeps the
``Authorization`` header fresh (:class:`ConfigAuth`).

``kubernetes`` is imported lazily: building an :class:`~podstatus.clients.http.HttpKubeClient`
from a URL and a token does not pay for importing it. Loading a kubeconfig does not pay
for its generated API either (:func:`kubernetes_config`): importing ``kubernetes`` runs
the package's ``__init__``, which builds hundreds of model and API classes (about
0.17 CPU-seconds and 25 MiB per process) that podstatus never uses. Unless the process
has imported ``kubernetes`` already, the package's own ``config`` modules (and
``client.configuration``) are executed privately instead: the same code, not a copy of
it, without touching ``sys.modules``.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.machinery
import importlib.util
import logging
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3

__all__ = [
    "ConfigAuth",
    "ConnectionSettings",
    "kubeconfig_files",
    "kubernetes_config",
    "load_in_cluster_configuration",
    "load_kubeconfig_configuration",
    "settings_from_configuration",
]

logger = logging.getLogger(__name__)

# A ``kubernetes.client.Configuration`` (typed loosely: the package has no type hints).
Configuration = Any


@dataclass(frozen=True, slots=True)
class KubernetesConfig:
    """What podstatus uses of ``kubernetes.config`` (the real package or a private load of it)."""

    load_kube_config: Callable[..., None]
    load_incluster_config: Callable[..., None]
    ConfigException: type[Exception]
    Configuration: Callable[[], Configuration]
    incluster_config: types.ModuleType
    private: bool


_CONFIG_LOCK = threading.Lock()
_PRIVATE_CONFIG: KubernetesConfig | None = None
# The package's modules executed privately, in import order: the name each has in the
# package, and its file under the package's folder.
_PRIVATE_MODULES = (
    ("kubernetes.client.configuration", "client/configuration.py"),
    ("kubernetes.config.config_exception", "config/config_exception.py"),
    ("kubernetes.config.dateutil", "config/dateutil.py"),
    ("kubernetes.config.exec_provider", "config/exec_provider.py"),
    ("kubernetes.config.incluster_config", "config/incluster_config.py"),
    ("kubernetes.config.kube_config", "config/kube_config.py"),
)
# Imported only when a kubeconfig needs them (OIDC refresh): ``requests`` alone costs as
# much as the rest of the loader.
_DEFERRED_IMPORTS = frozenset({"oauthlib", "oauthlib.oauth2", "requests_oauthlib"})


def kubernetes_config(*, private: bool | None = None) -> KubernetesConfig:
    """The official ``kubernetes.config`` loaders, imported as cheaply as possible.

    ``private=None`` (the default) uses the real package when the process has imported
    ``kubernetes`` already (one copy, and ``except kubernetes.config.ConfigException``
    in the caller's code keeps matching), else the private load. Whatever goes wrong in
    the private load (a ``kubernetes`` release that lays its modules out differently)
    falls back to importing the package.
    """
    if private is None:
        private = "kubernetes" not in sys.modules
    if private:
        try:
            return _private_kubernetes_config()
        except Exception:  # the package changed shape: pay for the full import instead
            logger.debug("loading kubernetes.config privately failed; importing kubernetes", exc_info=True)
    from kubernetes import client, config
    from kubernetes.config import incluster_config

    return KubernetesConfig(
        load_kube_config=config.load_kube_config,
        load_incluster_config=config.load_incluster_config,
        ConfigException=config.ConfigException,
        Configuration=client.Configuration,
        incluster_config=incluster_config,
        private=False,
    )


def _private_kubernetes_config() -> KubernetesConfig:
    global _PRIVATE_CONFIG
    with _CONFIG_LOCK:
        if _PRIVATE_CONFIG is None:
            modules = _execute_privately()
            kube_config = modules["kubernetes.config.kube_config"]
            incluster = modules["kubernetes.config.incluster_config"]
            _PRIVATE_CONFIG = KubernetesConfig(
                load_kube_config=kube_config.load_kube_config,
                load_incluster_config=incluster.load_incluster_config,
                ConfigException=modules["kubernetes.config.config_exception"].ConfigException,
                Configuration=modules["kubernetes.client.configuration"].Configuration,
                incluster_config=incluster,
                private=True,
            )
        return _PRIVATE_CONFIG


def _execute_privately() -> dict[str, types.ModuleType]:
    spec = importlib.util.find_spec("kubernetes")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the kubernetes package is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    modules: dict[str, types.ModuleType] = {}
    # ``from kubernetes.client import ApiClient, Configuration``: the loaders need only
    # ``Configuration``; ``ApiClient`` (OIDC refresh) imports the real package when called.
    client = types.ModuleType("kubernetes.client")
    client.ApiClient = _deferred_attribute("kubernetes.client", "ApiClient")  # type: ignore[attr-defined]
    modules["kubernetes.client"] = client

    def private_import(
        name: str,
        globals: dict[str, Any] | None = None,
        locals: Any = None,
        fromlist: tuple[str, ...] | list[str] | None = (),
        level: int = 0,
    ) -> Any:
        absolute = name
        if level:
            package = (globals or {}).get("__package__") or ""
            base = package.rsplit(".", level - 1)[0] if level > 1 else package
            absolute = f"{base}.{name}" if name else base
        if absolute in modules:
            if not fromlist:
                raise ImportError(f"`import {absolute}` is not supported by the private load")
            return modules[absolute]
        if absolute.split(".")[0] == "kubernetes":
            raise ImportError(f"{absolute} is not part of the private load")
        if absolute in _DEFERRED_IMPORTS:
            return _DeferredModule(absolute, list(fromlist or ()))
        return builtins.__import__(name, globals, locals, fromlist or (), level)

    private_builtins = {**builtins.__dict__, "__import__": private_import}
    for name, relative in _PRIVATE_MODULES:
        path = root / relative
        module = types.ModuleType(name)
        module.__file__ = str(path)
        module.__package__ = name.rpartition(".")[0]
        module.__dict__["__builtins__"] = private_builtins
        # The loader's ``get_code`` reads the bytecode pip compiled at install (``__pycache__``).
        code = importlib.machinery.SourceFileLoader(name, str(path)).get_code(name)
        if code is None:
            raise ImportError(f"no code in {path}")
        exec(code, module.__dict__)
        modules[name] = module
        if name == "kubernetes.client.configuration":
            client.Configuration = module.Configuration  # type: ignore[attr-defined]
    return modules


def _deferred_attribute(module: str, attribute: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    call.__name__ = attribute
    return call


class _DeferredModule:
    """A module imported on first use: ``import a.b`` binds ``a``; ``from a import f`` binds a deferred ``f``."""

    def __init__(self, name: str, fromlist: list[str]) -> None:
        self._name = name
        self._fromlist = fromlist

    def __getattr__(self, attribute: str) -> Any:
        if attribute in self._fromlist:
            return _deferred_attribute(self._name, attribute)
        importlib.import_module(self._name)
        return getattr(sys.modules[self._name.split(".")[0]], attribute)


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
    config = kubernetes_config()
    if path is None:
        path = os.environ.get("KUBECONFIG") or os.path.join("~", ".kube", "config")
    cfg = config.Configuration()
    config.load_kube_config(
        config_file=os.fspath(path), context=context, client_configuration=cfg, persist_config=False
    )
    return cfg


def load_in_cluster_configuration() -> Configuration:
    """A fresh ``Configuration`` from the pod's service account (raises ``ConfigException`` outside a pod)."""
    config = kubernetes_config()
    cfg = config.Configuration()
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
      and tells whether the header changed, so the caller can retry once;
    - after a connection that could not be made (refused, or a server certificate the CA
      does not verify), :meth:`after_connection_failure` reloads when one of ``files`` (the
      kubeconfig files) changed since: a server restarted with a new address, CA or token
      rewrites its kubeconfig, and its clients follow.
    """

    def __init__(
        self,
        cfg: Configuration,
        *,
        reload: Callable[[], Configuration] | None = None,
        refresh_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        files: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        self._cfg = cfg
        self._reload = reload
        self._files = [os.path.expanduser(os.fspath(f)) for f in files]
        self._files_seen = _files_signature(self._files)
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
            seen = _files_signature(self._files)
            try:
                cfg = self._reload()
            except Exception:
                logger.warning("reloading the API credentials after a 401 failed", exc_info=True)
                return False, sent
            self._files_seen = seen
            changed = self._install(cfg, sent)
            logger.debug("reloaded API credentials after a 401", extra={"changed": changed})
            return changed, self._value

    def after_connection_failure(self) -> bool:
        """After a connection that could not be made: reload if a kubeconfig file changed.

        True when the reload changed the server, its CA or the credentials (retry once).
        """
        with self._lock:
            if self._reload is None or not self._files:
                return False
            seen = _files_signature(self._files)
            if seen == self._files_seen:
                return False
            # Once per change, even if this reload fails: a broken file is not read per request.
            self._files_seen = seen
            try:
                cfg = self._reload()
            except Exception as err:
                logger.warning(
                    "the kubeconfig changed but cannot be loaded: %s", err, extra={"files": self._files}
                )
                return False
            changed = self._install(cfg, self._value)
            logger.info(
                "the kubeconfig changed: reloaded it", extra={"files": self._files, "changed": changed}
            )
            return changed

    def _install(self, cfg: Configuration, sent: str | None) -> bool:
        """Use ``cfg`` from now on; whether the header or the connection settings changed."""
        old_settings = settings_from_configuration(self._cfg)
        new_settings = settings_from_configuration(cfg)
        self._cfg = cfg
        self._value = authorization_from_configuration(cfg)
        self._checked_at = self._clock()
        changed = self._value != sent
        if new_settings != old_settings and self.settings_changed is not None:
            self.settings_changed(new_settings)
            changed = True
        return changed


def kubeconfig_files(path: str | os.PathLike[str] | None) -> list[str]:
    """The files a kubeconfig is read from: ``path``, else ``$KUBECONFIG``'s list, else ``~/.kube/config``."""
    if path is not None:
        return [os.fspath(path)]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [f for f in env.split(os.pathsep) if f]
    return [os.path.join("~", ".kube", "config")]


def _files_signature(files: Sequence[str]) -> tuple[tuple[int, int, int] | None, ...]:
    """What tells a rewritten file: (inode, size, mtime) per file; a rename over it changes the inode."""
    out: list[tuple[int, int, int] | None] = []
    for name in files:
        try:
            st = os.stat(name)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)

"""Loading cluster configuration through ``kubernetes.config``: the real package and the private load.

Every behaviour is checked on both paths (``loader`` fixture), so the private load is
held to what the imported package does; a fresh interpreter checks that a podstatus
process that never imports ``kubernetes`` does not pay for it, and that a later
``import kubernetes`` still works.
"""

from __future__ import annotations

import base64
import functools
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podstatus.clients import http as http_module
from podstatus.clients import kubeconfig
from podstatus.clients.http import HttpKubeClient
from podstatus.clients.kubeconfig import (
    ConfigAuth,
    KubernetesConfig,
    authorization_from_configuration,
    kubernetes_config,
    load_in_cluster_configuration,
    load_kubeconfig_configuration,
    settings_from_configuration,
)

SERVER = "https://10.1.2.3:6443"


def write_kubeconfig(path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": SERVER, **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(params=["private", "package"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubernetesConfig]:
    private = request.param == "private"
    chosen = functools.partial(kubernetes_config, private=private)
    monkeypatch.setattr(kubeconfig, "kubernetes_config", chosen)
    monkeypatch.setattr(http_module, "kubernetes_config", chosen)
    config = chosen()
    assert config.private is private
    yield config


def test_token(loader: KubernetesConfig, tmp_path: Path) -> None:
    cfg = load_kubeconfig_configuration(write_kubeconfig(tmp_path / "config", {"token": "tok-1"}))
    assert isinstance(cfg, loader.Configuration)  # type: ignore[arg-type]
    settings = settings_from_configuration(cfg)
    assert settings.base_url == SERVER
    assert settings.verify is True
    assert authorization_from_configuration(cfg) == "Bearer tok-1"


def test_inline_certificates_are_written_to_files(loader: KubernetesConfig, tmp_path: Path) -> None:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    path = write_kubeconfig(
        tmp_path / "config",
        {"client-certificate-data": b64("CERT"), "client-key-data": b64("KEY")},
        {"certificate-authority-data": b64("CA"), "tls-server-name": "api.example"},
    )
    settings = settings_from_configuration(load_kubeconfig_configuration(path))
    assert settings.ca_cert and Path(settings.ca_cert).read_text() == "CA"
    assert settings.client_cert and Path(settings.client_cert).read_text() == "CERT"
    assert settings.client_key and Path(settings.client_key).read_text() == "KEY"
    assert settings.tls_server_name == "api.example"


def test_context_argument_and_missing_context(loader: KubernetesConfig, tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {"token": "t"})
    assert settings_from_configuration(load_kubeconfig_configuration(path, "ctx")).base_url == SERVER
    with pytest.raises(loader.ConfigException):
        load_kubeconfig_configuration(path, "no-such-context")


EXEC_PLUGIN = """
import json, pathlib, sys
token = pathlib.Path(sys.argv[1]).read_text().strip()
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": token}}))
"""


def test_exec_plugin_and_reload(loader: KubernetesConfig, tmp_path: Path) -> None:
    script, token_file = tmp_path / "plugin.py", tmp_path / "token"
    script.write_text(EXEC_PLUGIN)
    token_file.write_text("first")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(script), str(token_file)],
            "interactiveMode": "Never",
        }
    }
    path = write_kubeconfig(tmp_path / "config", user)
    auth = ConfigAuth(load_kubeconfig_configuration(path), reload=lambda: load_kubeconfig_configuration(path))
    assert auth.header() == "Bearer first"
    token_file.write_text("second")
    assert auth.after_unauthorized("Bearer first") == (True, "Bearer second")


def test_in_cluster(loader: KubernetesConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("CA")
    monkeypatch.setattr(loader.incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(loader.incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = load_in_cluster_configuration()
    assert settings_from_configuration(cfg).base_url == "https://10.0.0.1:443"
    assert authorization_from_configuration(cfg) == "bearer sa-token"


def test_from_config_outside_a_cluster_uses_the_kubeconfig(
    loader: KubernetesConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # load_incluster_config raises the loader's own ConfigException, which from_config catches.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "config", {"token": "t"})))
    with pytest.raises(loader.ConfigException):
        load_in_cluster_configuration()
    with HttpKubeClient.from_config() as client:
        assert client.base_url == SERVER


def test_default_is_the_package_once_imported() -> None:
    import kubernetes.config

    config = kubernetes_config()
    assert config.private is False
    assert config.ConfigException is kubernetes.config.ConfigException


def test_a_failed_private_load_falls_back_to_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubernetes.config

    def broken() -> KubernetesConfig:
        raise ImportError("laid out differently")

    monkeypatch.setattr(kubeconfig, "_private_kubernetes_config", broken)
    config = kubernetes_config(private=True)
    assert config.private is False
    assert config.load_kube_config is kubernetes.config.load_kube_config


def test_deferred_imports_resolve_to_the_real_modules() -> None:
    import oauthlib.oauth2
    import requests_oauthlib

    lazy = kubeconfig._DeferredModule("oauthlib.oauth2", [])
    assert lazy.oauth2 is oauthlib.oauth2  # ``import oauthlib.oauth2`` binds ``oauthlib``
    session = kubeconfig._DeferredModule("requests_oauthlib", ["OAuth2Session"]).OAuth2Session
    assert isinstance(session(client_id="x"), requests_oauthlib.OAuth2Session)


def _fresh_python(code: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_fresh_process_does_not_import_kubernetes(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {"token": "fresh"})
    result = _fresh_python(
        f"""
        import json, sys
        from podstatus.clients.http import HttpKubeClient
        from podstatus.clients.kubeconfig import kubernetes_config
        client = HttpKubeClient.from_kubeconfig({str(path)!r})
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "requests", "oauthlib"))
        print(json.dumps({{"url": client.base_url, "auth": client._authorization(), "heavy": heavy,
                           "private": kubernetes_config().private}}))
        """
    )
    assert result == {"url": SERVER, "auth": "Bearer fresh", "heavy": [], "private": True}


def test_importing_kubernetes_after_a_private_load_still_works(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {"token": "later"})
    result = _fresh_python(
        f"""
        import json
        from podstatus.clients.kubeconfig import load_kubeconfig_configuration
        load_kubeconfig_configuration({str(path)!r})
        import kubernetes
        api = kubernetes.config.new_client_from_config(config_file={str(path)!r})
        print(json.dumps({{"host": api.configuration.host, "core": hasattr(kubernetes.client, "CoreV1Api"),
                           "key": api.configuration.api_key}}))
        """
    )
    assert result == {"host": SERVER, "core": True, "key": {"BearerToken": "Bearer later"}}

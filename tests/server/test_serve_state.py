"""`podstatus serve`'s state folder: the same CA, serving certificate and token at every start."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from podstatus.server.security import KUBELET_CLIENT_CA_FILE, STATE_FILE, load_credentials


def test_the_same_folder_gives_the_same_credentials(tmp_path: Path) -> None:
    first = load_credentials(tmp_path / "s", ["127.0.0.1"], token=True, tls=True)
    assert set(first.made) == {"token", "CA", "serving certificate", "kubelet client certificate"}
    again = load_credentials(tmp_path / "s", ["127.0.0.1"], token=True, tls=True)
    assert (again.token, again.tls, again.made) == (first.token, first.tls, ())
    # The kubelet client certificate is kept too, and its CA (the cluster CA) is in the folder.
    assert again.kubelet_client == first.kubelet_client and first.kubelet_client is not None
    assert first.tls is not None
    assert (tmp_path / "s" / KUBELET_CLIENT_CA_FILE).read_bytes() == first.tls.ca_pem
    path = tmp_path / "s" / STATE_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "s").stat().st_mode) == 0o700
    # Another folder: other credentials.
    other = load_credentials(tmp_path / "o", ["127.0.0.1"], token=True, tls=True)
    assert other.token != first.token and other.tls is not None and first.tls is not None
    assert other.tls.ca_pem != first.tls.ca_pem


def test_a_new_host_gets_a_new_certificate_from_the_same_ca(tmp_path: Path) -> None:
    first = load_credentials(tmp_path, ["127.0.0.1"], token=True, tls=True)
    moved = load_credentials(tmp_path, ["::1", "example.test"], token=True, tls=True)
    assert moved.made == ("serving certificate",)
    assert first.tls is not None and moved.tls is not None
    assert moved.tls.ca_pem == first.tls.ca_pem and moved.tls.cert_pem != first.tls.cert_pem
    assert moved.token == first.token


def test_token_and_tls_off_keep_what_is_there(tmp_path: Path) -> None:
    first = load_credentials(tmp_path, ["127.0.0.1"], token=True, tls=True)
    off = load_credentials(tmp_path, ["127.0.0.1"], token=False, tls=False)
    assert (off.token, off.tls, off.made) == (None, None, ())
    assert load_credentials(tmp_path, ["127.0.0.1"], token=True, tls=True).token == first.token


@pytest.mark.parametrize("content", [b"not json", b"[]", b'{"token": 5}', b'{"caCert": "garbage"}'])
def test_a_broken_state_file_is_an_error_naming_it_and_is_left_alone(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / STATE_FILE
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"{path} is not a podstatus serve state file"):
        load_credentials(tmp_path, ["127.0.0.1"], token=True, tls=True)
    assert path.read_bytes() == content


def test_the_state_file_is_never_read_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"token": "planted"}))
    (tmp_path / STATE_FILE).symlink_to(target)
    with pytest.raises(ValueError, match="cannot read"):
        load_credentials(tmp_path, ["127.0.0.1"], token=True, tls=False)

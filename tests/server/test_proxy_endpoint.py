"""Which address and port of a Node ``podstatus serve`` dials for its kubelet (kube-apiserver's rules)."""

from __future__ import annotations

from typing import Any

import pytest

from podstatus.errors import ApiError
from podstatus.server.proxy import DEFAULT_ADDRESS_TYPES, node_endpoint


def _node(addresses: list[dict[str, str]], port: int | None = 10250) -> dict[str, Any]:
    status: dict[str, Any] = {"addresses": addresses}
    if port is not None:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return {"metadata": {"name": "vn-1"}, "status": status}


def test_the_first_preferred_type_wins_whatever_the_order_of_the_addresses() -> None:
    node = _node(
        [{"type": "Hostname", "address": "vn-1"}, {"type": "InternalIP", "address": "127.0.0.7"}], 10251
    )
    assert node_endpoint(node) == ("127.0.0.7", 10251)
    assert node_endpoint(node, ("Hostname", "InternalIP")) == ("vn-1", 10251)
    assert DEFAULT_ADDRESS_TYPES == ("InternalIP", "ExternalIP", "Hostname")


def test_no_address_of_a_preferred_type_is_kube_apiservers_500() -> None:
    node = _node([{"type": "InternalDNS", "address": "vn-1.local"}])
    with pytest.raises(ApiError) as caught:
        node_endpoint(node)
    assert caught.value.code == 500
    assert caught.value.message == "no preferred addresses found; known addresses: [{InternalDNS vn-1.local}]"
    assert caught.value.status is not None and "reason" not in caught.value.status


@pytest.mark.parametrize("port", [None, 0])
def test_a_node_without_a_kubelet_port_says_it_has_no_kubelet_api(port: int | None) -> None:
    # Never the default 10250: another podstatus node's kubelet may listen there.
    with pytest.raises(ApiError) as caught:
        node_endpoint(_node([{"type": "InternalIP", "address": "127.0.0.1"}], port))
    assert caught.value.code == 500
    assert caught.value.message.startswith('node "vn-1" has no kubelet API')

"""types: decode + encode of the fixture pod, ours against the official ``kubernetes`` models.

Ours: ``Pod.from_json(raw_bytes)`` then ``.to_dict()`` (and ``.to_json()``).
Peer: ``ApiClient().deserialize(text, "V1Pod", "application/json")`` then ``.to_dict()``,
which is what the official client does with every answer it gets.

Dict to dict: ours ``Pod.from_dict(d).to_dict()`` (the wire dict in, the wire
dict out), the peer's the same with its models: its deserializer on the dict
(``ApiClient._ApiClient__deserialize(d, "V1Pod")``, what ``deserialize`` runs
after parsing JSON) then ``sanitize_for_serialization`` (back to the wire
dict, camelCase keys and RFC 3339 times, what it sends).
"""

from __future__ import annotations

import json
from typing import Any

try:
    from bench._common import fixture_bytes, interleaved, ratio_stats
except ImportError:  # run as a script from bench/
    from _common import fixture_bytes, interleaved, ratio_stats  # type: ignore[no-redef]


def run(repeats: int = 9, target: float = 0.05) -> dict[str, Any]:
    from kubernetes.client import ApiClient

    from podstatus.types import Pod

    raw = fixture_bytes()
    text = raw.decode()
    api = ApiClient()

    # Both must give back the pod; check once, outside the timing.
    ours_pod = Pod.from_json(raw)
    peer_pod = api.deserialize(text, "V1Pod", "application/json")
    assert ours_pod.metadata.uid == peer_pod.metadata.uid
    assert len(ours_pod.status.container_statuses or ()) == len(peer_pod.status.container_statuses)

    def ours() -> Any:
        return Pod.from_json(raw).to_dict()

    def ours_json() -> Any:
        return Pod.from_json(raw).to_json()

    def ours_decode() -> Any:
        return Pod.from_json(raw)

    def peer() -> Any:
        return api.deserialize(text, "V1Pod", "application/json").to_dict()

    def peer_decode() -> Any:
        return api.deserialize(text, "V1Pod", "application/json")

    as_dict = json.loads(raw)
    # Both give the wire dict back.
    assert Pod.from_dict(as_dict).to_dict() == as_dict
    peer_back = api.sanitize_for_serialization(api._ApiClient__deserialize(as_dict, "V1Pod"))
    assert (
        peer_back["status"]["containerStatuses"][0]["name"]
        == as_dict["status"]["containerStatuses"][0]["name"]
    )

    def ours_dict() -> Any:
        return Pod.from_dict(as_dict).to_dict()

    def peer_dict() -> Any:
        return api.sanitize_for_serialization(api._ApiClient__deserialize(as_dict, "V1Pod"))

    stats = interleaved(
        {
            "ours": ours,
            "peer": peer,
            "ours_json": ours_json,
            "ours_decode": ours_decode,
            "peer_decode": peer_decode,
            "ours_dict": ours_dict,
            "peer_dict": peer_dict,
        },
        repeats=repeats,
        target=target,
    )
    ratio = ratio_stats(stats["peer"], stats["ours"])
    ratio_json = ratio_stats(stats["peer"], stats["ours_json"])
    ratio_decode = ratio_stats(stats["peer_decode"], stats["ours_decode"])
    ratio_dict = ratio_stats(stats["peer_dict"], stats["ours_dict"])
    return {
        "bytes": len(raw),
        "repeats": repeats,
        "ours_us": stats["ours"].as_dict(1e6),
        "ours_json_us": stats["ours_json"].as_dict(1e6),
        "ours_decode_us": stats["ours_decode"].as_dict(1e6),
        "peer_us": stats["peer"].as_dict(1e6),
        "peer_decode_us": stats["peer_decode"].as_dict(1e6),
        "ratio": ratio.as_dict(),
        "ratio_json": ratio_json.as_dict(),
        "ratio_decode": ratio_decode.as_dict(),
        "ours_dict_us": stats["ours_dict"].as_dict(1e6),
        "peer_dict_us": stats["peer_dict"].as_dict(1e6),
        "ratio_dict": ratio_dict.as_dict(),
        "met_dict": ratio_dict.median >= 20.0,
        "target": 20.0,
        # Encode is to the wire form (JSON), the peer's to a dict: both are "encode" in their model.
        "met": ratio_json.median >= 20.0 and ratio_dict.median >= 20.0,
    }


if __name__ == "__main__":
    import pprint

    pprint.pprint(run())

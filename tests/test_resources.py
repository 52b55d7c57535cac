"""podstatus.resources: quantities as kube-apiserver stores them (resource.Quantity's canonical form)."""

from __future__ import annotations

import pytest

from podstatus.resources import canonical_quantity

CASES = [
    ("0.3", "300m"),
    ("300m", "300m"),
    ("1000m", "1"),
    ("1.5", "1500m"),
    ("2000", "2k"),
    ("1500000", "1500k"),
    ("1024Mi", "1Gi"),
    ("1536Mi", "1536Mi"),
    ("0.5Gi", "512Mi"),
    ("64Mi", "64Mi"),
    ("1e3", "1e3"),
    ("2E", "2E"),
    ("0.0000000001", "1n"),  # below nano: rounded up
    (4, "4"),
    ("0", "0"),
    ("lots", "lots"),  # not a quantity: left for validation to report
]


@pytest.mark.parametrize(("given", "stored"), CASES, ids=[str(c[0]) for c in CASES])
def test_canonical_quantity(given: object, stored: str) -> None:
    assert canonical_quantity(given) == stored

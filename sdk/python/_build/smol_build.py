"""
A PEP 517 backend with no requirements: the wheel is src/smol zipped with its dist-info, the sdist the tree.

It exists because the package must install offline (`pip install ./sdk/python`) where PyPI is unreachable and
pip's isolated build could not fetch setuptools. Pure Python, one package: nothing for a bigger backend to do.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional

NAME = "smol-sdk"
DIST = "smol_sdk"
SUMMARY = "Python SDK for smol serve: microVMs with exec, files, fork and pause (standard library only)"
REQUIRES_PYTHON = ">=3.9"
LICENSE = "Apache-2.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "src", "smol")
TAG = "py3-none-any"


def _version() -> str:
    with open(os.path.join(PKG, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("src/smol/__init__.py has no __version__ line")
    return m.group(1)


def _metadata() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (
        f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\nSummary: {SUMMARY}\n"
        f"License: {LICENSE}\nRequires-Python: {REQUIRES_PYTHON}\nClassifier: Typing :: Typed\n"
        f"Description-Content-Type: text/markdown\n\n{readme}"
    )


def _package_files() -> List[str]:
    return sorted(n for n in os.listdir(PKG) if n.endswith(".py") or n == "py.typed")


def _dist_info() -> str:
    return f"{DIST}-{_version()}.dist-info"


def _write_wheel(wheel_directory: str, files: Dict[str, bytes]) -> str:
    name = f"{DIST}-{_version()}-{TAG}.whl"
    files[f"{_dist_info()}/METADATA"] = _metadata().encode()
    files[f"{_dist_info()}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: smol_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"
    ).encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{_dist_info()}/RECORD,,")
    files[f"{_dist_info()}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    files = {}
    for n in _package_files():
        with open(os.path.join(PKG, n), "rb") as f:
            files[f"smol/{n}"] = f.read()
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    # PEP 660: a .pth line puts src/ on sys.path, so edits show without reinstalling
    return _write_wheel(wheel_directory, {f"{DIST}.pth": (os.path.join(ROOT, "src") + "\n").encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    base = f"{DIST}-{_version()}"
    name = f"{base}.tar.gz"
    keep = ["pyproject.toml", "README.md", "_build/smol_build.py"] + [f"src/smol/{n}" for n in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in keep:
            t.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}", recursive=False)
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        t.addfile(info, io.BytesIO(pkg_info))
    return name


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []

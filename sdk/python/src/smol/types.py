"""Typed views of the API's JSON answers (docs/openapi.json). `raw` keeps the whole answer for fields added later."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .errors import SmolProtocolError


def _str(d: Dict[str, Any], key: str) -> Optional[str]:
    v = d.get(key)
    return v if isinstance(v, str) else None


def _int(d: Dict[str, Any], key: str) -> Optional[int]:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class MachineInfo:
    """A machine as `smol machine ls --json` prints it."""

    name: str
    id: str
    state: str
    image: str
    cpus: Optional[int]
    memory_mib: Optional[int]
    labels: Dict[str, str]
    created_at: Optional[str]
    started_at: Optional[str]
    pid: Optional[int]
    parent: Optional[str]
    last_error: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "MachineInfo":
        if not isinstance(d, dict):
            raise SmolProtocolError(f"a machine in the answer is {type(d).__name__}, not an object")
        labels = d.get("labels")
        return cls(
            name=str(d.get("name", "")), id=str(d.get("id", "")), state=str(d.get("state", "")),
            image=str(d.get("image", "")), cpus=_int(d, "cpus"), memory_mib=_int(d, "memoryMiB"),
            labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
            created_at=_str(d, "createdAt"), started_at=_str(d, "startedAt"), pid=_int(d, "pid"),
            parent=_str(d, "parent"), last_error=_str(d, "lastError"), raw=d,
        )


@dataclass(frozen=True)
class ExecResult:
    """A finished guest command. `stdout`/`stderr` are the exact bytes; `.text`/`.err` decode them."""

    exit_code: Optional[int]
    signal: Optional[str]
    timed_out: bool
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: Optional[float] = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class ExecExit:
    """How a streamed command ended (its output went to the iterator)."""

    exit_code: Optional[int]
    signal: Optional[str]
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class FileEntry:
    name: str
    type: str  # file | dir | symlink | other
    size: int
    mode: int  # permission bits, e.g. 0o644


class FileList(List[FileEntry]):
    """A directory's entries; `truncated` when the directory has more than one listing returns."""

    truncated: bool = False


@dataclass(frozen=True)
class MachineEvent:
    """A lifecycle change from GET /v1/events."""

    name: str
    id: str
    state: str
    previous: Optional[str]
    at: str

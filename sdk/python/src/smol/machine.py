"""A machine handle: exec, files, lifecycle. A context manager that removes the machine on exit."""
from __future__ import annotations

import base64
import http.client
import json
from types import TracebackType
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, Union

from ._http import MAX_JSON_BYTES, Transport, iter_body, seg
from .errors import NotFound, SmolProtocolError, error_from_body
from .sse import SseParser
from .types import ExecExit, ExecResult, FileEntry, FileList, MachineInfo


def exec_body(argv: Sequence[str], env: Optional[Mapping[str, str]], workdir: Optional[str],
              timeout: Optional[float], stdin: Union[bytes, str, None]) -> Dict[str, Any]:
    if isinstance(argv, str) or not argv:
        raise ValueError("argv: a non-empty list of strings, e.g. ['sh', '-c', 'echo hi']")
    body: Dict[str, Any] = {"argv": list(argv)}
    if env:
        body["env"] = dict(env)
    if workdir:
        body["workdir"] = workdir
    if timeout is not None:
        body["timeoutMs"] = int(timeout * 1000)
    if stdin is not None:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        body["stdin"] = base64.b64encode(data).decode()
    return body


def exec_result(d: Dict[str, Any], b64: bool) -> ExecResult:
    def out(key: str) -> bytes:
        v = d.get(key) or ""
        if not isinstance(v, str):
            raise SmolProtocolError(f"exec answer: {key} is {type(v).__name__}, not a string")
        try:
            return base64.b64decode(v, validate=True) if b64 else v.encode()
        except ValueError as e:  # binascii.Error: the server said base64 and sent something else
            raise SmolProtocolError(f"exec answer: {key} is not base64 ({e})") from e
    return ExecResult(
        exit_code=d.get("exitCode"), signal=d.get("signal"), timed_out=bool(d.get("timedOut")),
        stdout=out("stdout"), stderr=out("stderr"),
        stdout_truncated=bool(d.get("stdoutTruncated")), stderr_truncated=bool(d.get("stderrTruncated")),
        duration_ms=d.get("durationMs"),
    )


def _socket_timeout(timeout: Optional[float]) -> Optional[float]:
    # the server ends the command at its timeout; the socket waits a little longer for that answer
    return None if timeout is None else timeout + 30.0


class ExecStream:
    """Iterates `(stream, bytes)` with stream "stdout" or "stderr" as the guest writes; then `.result`.

    Closing it early (or leaving a `with` block) drops the connection, and the server kills the command.
    """

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, where: str) -> None:
        self._conn = conn
        self._resp = resp
        self._where = where
        self._result: Optional[ExecExit] = None
        self._iter = self._events()

    def _events(self) -> Iterator[Tuple[str, bytes]]:
        parser = SseParser()
        try:
            for chunk in iter_body(self._resp):
                for ev in parser.feed(chunk):
                    data = _json_event(ev.data, self._where)
                    if ev.event in ("stdout", "stderr"):
                        yield ev.event, base64.b64decode(str(data.get("data", "")))
                    elif ev.event == "exit":
                        self._result = ExecExit(data.get("exitCode"), data.get("signal"), bool(data.get("timedOut")))
                        return
                    elif ev.event == "error":
                        raise error_from_body(0, data)
        finally:
            self.close()
        raise SmolProtocolError(f"{self._where}: the stream ended without an exit event (server gone?)")

    def __iter__(self) -> Iterator[Tuple[str, bytes]]:
        return self._iter

    def __next__(self) -> Tuple[str, bytes]:
        return next(self._iter)

    @property
    def result(self) -> ExecExit:
        """How the command ended; reads (and drops) any output not yet iterated."""
        for _ in self._iter:
            pass
        if self._result is None:
            raise SmolProtocolError(f"{self._where}: the stream was closed before the command ended")
        return self._result

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _json_event(data: str, where: str) -> Dict[str, Any]:
    try:
        parsed = json.loads(data)
    except ValueError as e:
        raise SmolProtocolError(f"{where}: an event's data is not JSON ({e})") from e
    if not isinstance(parsed, dict):
        raise SmolProtocolError(f"{where}: an event's data is not a JSON object")
    return parsed


class Files:
    """Files inside the machine; guest paths are absolute."""

    def __init__(self, machine: "Machine") -> None:
        self._m = machine

    def _base(self) -> str:
        return f"/v1/machines/{seg(self._m.name)}/files"

    def read(self, path: str, max_bytes: int = MAX_JSON_BYTES) -> bytes:
        data, _ = self._m._t.bytes("GET", self._base(), [("path", path)], max_bytes=max_bytes)
        return data

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def write(self, path: str, data: Union[bytes, str], mode: Optional[int] = None) -> int:
        """Write the whole file (made or replaced); returns the bytes written."""
        query = [("path", path)] + ([("mode", f"{mode:04o}")] if mode is not None else [])
        raw = data.encode() if isinstance(data, str) else bytes(data)
        out = self._m._t.json("PUT", self._base(), query, body=raw,
                              headers={"Content-Type": "application/octet-stream"})
        return int(out.get("bytes", len(raw))) if isinstance(out, dict) else len(raw)

    def list(self, path: str) -> FileList:
        out = self._m._t.json("GET", self._base() + "/list", [("path", path)])
        entries = FileList(FileEntry(name=str(e.get("name", "")), type=str(e.get("type", "other")),
                                     size=int(e.get("size") or 0), mode=_mode(e.get("mode")))
                           for e in out.get("entries", []) if isinstance(e, dict))
        entries.truncated = bool(out.get("truncated"))
        return entries

    def read_tar(self, path: str, max_bytes: int = MAX_JSON_BYTES) -> bytes:
        """The directory `path` as a tar (modes kept); open it with tarfile.open(fileobj=io.BytesIO(...))."""
        data, _ = self._m._t.bytes("GET", self._base() + "/tar", [("path", path)], max_bytes=max_bytes)
        return data

    def write_tar(self, path: str, tar: bytes) -> Dict[str, Any]:
        """Unpack a tar into the directory `path`; entries that would leave it are refused, nothing partial left."""
        out: Dict[str, Any] = self._m._t.json("PUT", self._base() + "/tar", [("path", path)], body=bytes(tar),
                                              headers={"Content-Type": "application/x-tar"})
        return out


def _mode(v: Any) -> int:
    if isinstance(v, int):
        return v
    try:
        return int(str(v), 8)
    except ValueError:
        return 0


class Machine:
    def __init__(self, transport: Transport, info: MachineInfo) -> None:
        self._t = transport
        self.info = info
        self.files = Files(self)

    def __repr__(self) -> str:
        return f"Machine(name={self.name!r}, state={self.state!r})"

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def state(self) -> str:
        return self.info.state

    def _path(self, suffix: str = "") -> str:
        return f"/v1/machines/{seg(self.name)}{suffix}"

    def _update(self, answer: Any) -> "Machine":
        self.info = MachineInfo.from_json(answer)
        return self

    def refresh(self) -> "Machine":
        return self._update(self._t.json("GET", self._path()))

    def exec(self, argv: Sequence[str], env: Optional[Mapping[str, str]] = None, workdir: Optional[str] = None,
             timeout: Optional[float] = None, stdin: Union[bytes, str, None] = None) -> ExecResult:
        """Run a command to its end; output is buffered on the server up to its cap (see *_truncated)."""
        body = exec_body(argv, env, workdir, timeout, stdin)
        body["encoding"] = "base64"
        out = self._t.json("POST", self._path("/exec"), json_body=body, timeout=_socket_timeout(timeout))
        return exec_result(out, b64=True)

    def exec_stream(self, argv: Sequence[str], env: Optional[Mapping[str, str]] = None,
                    workdir: Optional[str] = None, timeout: Optional[float] = None,
                    stdin: Union[bytes, str, None] = None) -> ExecStream:
        body = exec_body(argv, env, workdir, timeout, stdin)
        conn, resp = self._t.open("POST", self._path("/exec/stream"), json_body=body,
                                  headers={"Accept": "text/event-stream"}, timeout=_socket_timeout(timeout))
        return ExecStream(conn, resp, f"exec in {self.name}")

    def logs(self, follow: bool = True, tail: Optional[int] = None) -> Iterator[str]:
        """The console log, line by line; with follow it waits for new lines until closed."""
        query = [("follow", "1" if follow else "0")] + ([("tail", str(tail))] if tail is not None else [])
        accept = "text/event-stream" if follow else "text/plain"
        conn, resp = self._t.open("GET", self._path("/logs"), query, headers={"Accept": accept}, timeout=None)
        return _log_lines(conn, resp, follow, f"logs of {self.name}")

    def start(self) -> "Machine":
        return self._update(self._t.json("POST", self._path("/start")))

    def stop(self, force: bool = False, timeout: Optional[float] = None) -> "Machine":
        body: Dict[str, Any] = {"force": force}
        if timeout is not None:
            body["timeoutMs"] = int(timeout * 1000)
        return self._update(self._t.json("POST", self._path("/stop"), json_body=body))

    def pause(self, to_disk: bool = False) -> "Machine":
        return self._update(self._t.json("POST", self._path("/pause"), json_body={"toDisk": to_disk}))

    def resume(self) -> "Machine":
        return self._update(self._t.json("POST", self._path("/resume")))

    def fork(self, count: int = 1, name_prefix: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             labels: Optional[Mapping[str, str]] = None, wait_ready: Optional[bool] = None,
             hold: Optional[bool] = None) -> "Clones":
        """Live clones of this (forkable, running) machine; `env` values may use {index}, {name}, {count}."""
        body: Dict[str, Any] = {"count": count}
        for key, value in (("namePrefix", name_prefix), ("waitReady", wait_ready), ("hold", hold)):
            if value is not None:
                body[key] = value
        if env:
            body["env"] = dict(env)
        if labels:
            body["labels"] = dict(labels)
        return clones_of(self._t, self._t.json("POST", self._path("/fork"), json_body=body))

    def save_point(self, name: str) -> Dict[str, Any]:
        """Save a fork point (memory and disk) that `Smol.fork_point` starts clones from later."""
        out: Dict[str, Any] = self._t.json("POST", self._path("/points"), json_body={"name": name})
        return out

    def remove(self, force: bool = True) -> None:
        self._t.json("DELETE", self._path(), [("force", "true" if force else "false")])

    def __enter__(self) -> "Machine":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            self.remove(force=True)
        except NotFound:
            pass  # already gone: what the block wanted


class Clones(List[Machine]):
    """The clones that run; `failed` lists those that did not start ({name, error}): a partial fork keeps the rest."""

    failed: List[Dict[str, str]] = []
    total_ms: Optional[float] = None


def clones_of(transport: Transport, out: Any) -> Clones:
    clones = Clones(Machine(transport, MachineInfo.from_json(c)) for c in out.get("clones", []))
    clones.failed = [f for f in out.get("failed", []) if isinstance(f, dict)]
    clones.total_ms = out.get("totalMs")
    return clones


def _log_lines(conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, follow: bool,
               where: str) -> Iterator[str]:
    try:
        if follow and (resp.getheader("Content-Type") or "").startswith("text/event-stream"):
            parser = SseParser()
            for chunk in iter_body(resp):
                for ev in parser.feed(chunk):
                    if ev.event == "line":
                        yield str(_json_event(ev.data, where).get("line", ""))
                    elif ev.event == "error":
                        raise error_from_body(0, _json_event(ev.data, where))
            return
        # plain text: split on newlines with the same line cap as the event stream
        pending = b""
        for chunk in iter_body(resp):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                # the serial console ends lines with CRLF
                yield line.rstrip(b"\r").decode("utf-8", errors="replace")
            if len(pending) > 8 * 1024 * 1024:
                raise SmolProtocolError(f"{where}: a log line over 8 MiB")
        if pending.rstrip(b"\r"):
            yield pending.rstrip(b"\r").decode("utf-8", errors="replace")
    finally:
        conn.close()

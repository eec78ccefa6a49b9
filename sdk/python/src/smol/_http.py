"""The wire: http.client over the Unix socket (default) or TCP/HTTPS, JSON in and out, errors mapped."""
from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from .errors import SmolConnectionError, SmolProtocolError, error_from_body

# An answer bigger than this is not one the API sends (exec output is capped at 16 MiB a stream, base64 grows it)
MAX_JSON_BYTES = 128 * 1024 * 1024
MAX_ERROR_BYTES = 1024 * 1024
CHUNK = 64 * 1024

Query = Sequence[Tuple[str, str]]
Body = Union[bytes, None]


def default_socket_path(env: Mapping[str, str] = os.environ) -> str:
    """$SMOL_HOME/smol.sock, SMOL_HOME defaulting as the CLI does ($XDG_DATA_HOME/smol, ~/.local/share/smol)."""
    home = env.get("SMOL_HOME")
    if not home:
        xdg = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        home = os.path.join(xdg, "smol")
    return os.path.join(os.path.abspath(home), "smol.sock")


def seg(name: str) -> str:
    """One path segment (a machine name or id) quoted so it can never add a segment."""
    return quote(name, safe="")


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket: http.client does the protocol, this only opens the socket."""

    def __init__(self, path: str, timeout: Optional[float] = None) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class Transport:
    def __init__(
        self,
        socket_path: Optional[str] = None,
        url: Optional[str] = None,
        token: Optional[str] = None,
        cafile: Optional[str] = None,
        timeout: Optional[float] = 300.0,
    ) -> None:
        self.token = token
        self.timeout = timeout
        self._ssl: Optional[ssl.SSLContext] = None
        if url:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"url {url!r}: expected http://HOST:PORT or https://HOST:PORT")
            self.where = url
            self._host = parts.hostname
            self._port = parts.port
            self._prefix = parts.path.rstrip("/")
            self.socket_path: Optional[str] = None
            if parts.scheme == "https":
                self._ssl = ssl.create_default_context(cafile=cafile)
        else:
            self.socket_path = socket_path or default_socket_path()
            self.where = self.socket_path
            self._prefix = ""

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.socket_path is not None:
            return UnixHTTPConnection(self.socket_path, timeout=timeout)
        if self._ssl is not None:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def open(
        self,
        method: str,
        path: str,
        query: Optional[Query] = None,
        json_body: Any = None,
        body: Body = None,
        headers: Optional[Dict[str, str]] = None,
        timeout: Optional[float] = -1.0,
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request; a non-2xx answer raises its SmolApiError. The caller reads and closes the answer."""
        hdrs: Dict[str, str] = {"Accept": "application/json", **(headers or {})}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if json_body is not None:
            body = json.dumps(json_body).encode()
            hdrs["Content-Type"] = "application/json"
        target = self._prefix + path + (f"?{urlencode(list(query))}" if query else "")
        conn = self._connection(self.timeout if timeout == -1.0 else timeout)
        try:
            conn.request(method, target, body=body, headers=hdrs)
            resp = conn.getresponse()
        except (ConnectionError, FileNotFoundError, socket.timeout, ssl.SSLError, OSError) as e:
            conn.close()
            raise SmolConnectionError(
                f"{method} {path} failed: cannot reach the smol server at {self.where}: {e}"
                + ("" if self.socket_path is None else " (is `smol serve` running? it makes the socket)")
            ) from e
        if resp.status >= 300:
            raw = read_capped(resp, MAX_ERROR_BYTES, truncate=True)
            conn.close()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            raise error_from_body(resp.status, parsed, raw.decode("utf-8", errors="replace"))
        return conn, resp

    def json(self, method: str, path: str, query: Optional[Query] = None, json_body: Any = None,
             body: Body = None, headers: Optional[Dict[str, str]] = None,
             timeout: Optional[float] = -1.0) -> Any:
        conn, resp = self.open(method, path, query, json_body, body, headers, timeout)
        try:
            raw = read_capped(resp, MAX_JSON_BYTES)
        finally:
            conn.close()
        if not raw:
            return None
        try:
            parsed = json.loads(raw)
        except ValueError as e:
            raise SmolProtocolError(f"{method} {path}: the answer is not JSON ({e})") from e
        # every JSON answer of the API is an object: anything else would surface as an AttributeError somewhere
        if not isinstance(parsed, dict):
            raise SmolProtocolError(f"{method} {path}: the answer is JSON but not an object")
        return parsed

    def bytes(self, method: str, path: str, query: Optional[Query] = None, max_bytes: int = MAX_JSON_BYTES,
              timeout: Optional[float] = -1.0) -> Tuple[bytes, http.client.HTTPResponse]:
        conn, resp = self.open(method, path, query, headers={"Accept": "*/*"}, timeout=timeout)
        try:
            return read_capped(resp, max_bytes), resp
        finally:
            conn.close()


def read_capped(resp: http.client.HTTPResponse, cap: int, truncate: bool = False) -> bytes:
    """The whole body, refusing (or with truncate, cutting) past `cap` before it is all in memory."""
    declared = resp.getheader("Content-Length")
    if not truncate and declared and declared.isdigit() and int(declared) > cap:
        raise SmolProtocolError(f"answer of {declared} bytes is over the {cap}-byte cap (pass a larger max_bytes)")
    parts: List[bytes] = []
    size = 0
    while True:
        try:
            chunk = resp.read(min(CHUNK, cap + 1 - size))
        except (http.client.HTTPException, OSError) as e:
            raise SmolConnectionError(f"the smol server broke off the answer ({e!r}): did it exit?") from e
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
        if size > cap:
            if truncate:
                return b"".join(parts)[:cap]
            raise SmolProtocolError(f"answer is over the {cap}-byte cap (pass a larger max_bytes)")
    return b"".join(parts)


def iter_body(resp: http.client.HTTPResponse) -> Iterator[bytes]:
    """The body as it arrives (read1: whatever is there now, so a stream's events are not held back)."""
    while True:
        try:
            chunk = resp.read1(CHUNK)
        except (http.client.HTTPException, OSError) as e:
            raise SmolConnectionError(f"the smol server broke off the answer mid-stream ({e!r}): did it exit?") from e
        if not chunk:
            return
        yield chunk

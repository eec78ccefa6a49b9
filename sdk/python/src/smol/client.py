"""The client: `Smol()` talks to `smol serve` over its Unix socket, or a TCP/HTTPS URL with a bearer token."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._http import Transport, iter_body, seg
from .machine import Clones, Machine, _json_event, clones_of, exec_body, exec_result
from .errors import SmolProtocolError, error_from_body
from .sse import SseParser
from .types import ExecResult, MachineEvent, MachineInfo


class Machines:
    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def create(
        self,
        image: Optional[str] = None,
        name: Optional[str] = None,
        memory: Union[int, str, None] = None,
        cpus: Optional[int] = None,
        workdir: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        ports: Optional[Sequence[str]] = None,
        volumes: Optional[Sequence[str]] = None,
        net: Optional[bool] = None,
        labels: Optional[Mapping[str, str]] = None,
        smolfile: Union[str, Mapping[str, Any], None] = None,
        from_artifact: Optional[str] = None,
        start: bool = True,
    ) -> Machine:
        """Create (and by default start) a machine; `memory` is MiB or a size such as "512M"."""
        body: Dict[str, Any] = {"start": start}
        for key, value in (("image", image), ("name", name), ("memory", memory), ("cpus", cpus),
                           ("workdir", workdir), ("net", net), ("from", from_artifact)):
            if value is not None:
                body[key] = value
        for key, seq in (("ports", ports), ("volumes", volumes)):
            if seq:
                body[key] = list(seq)
        if env:
            body["env"] = dict(env)
        if labels:
            body["labels"] = dict(labels)
        if smolfile is not None:
            body["smolfile"] = smolfile if isinstance(smolfile, str) else dict(smolfile)
        return Machine(self._t, MachineInfo.from_json(self._t.json("POST", "/v1/machines", json_body=body)))

    def get(self, name: str) -> Machine:
        return Machine(self._t, MachineInfo.from_json(self._t.json("GET", f"/v1/machines/{seg(name)}")))

    def list(self, labels: Optional[Mapping[str, str]] = None, state: Optional[str] = None) -> List[Machine]:
        """Machines whose labels match all of `labels` (a value of None matches any value of that key)."""
        query = [("label", k if v is None else f"{k}={v}") for k, v in (labels or {}).items()]
        if state:
            query.append(("state", state))
        out = self._t.json("GET", "/v1/machines", query)
        machines = out.get("machines", [])
        if not isinstance(machines, list):
            raise SmolProtocolError("GET /v1/machines: machines is not a list")
        return [Machine(self._t, MachineInfo.from_json(m)) for m in machines]


class Smol:
    """`Smol()` uses $SMOL_URL/$SMOL_TOKEN when set, else the socket $SMOL_HOME/smol.sock.

    `Smol(url="https://host:8443", token="...", cafile="ca.pem")` for a TCP listener (`smol serve --listen`).
    `timeout` bounds each call's socket wait in seconds (exec and streams wait as long as the command does).
    """

    def __init__(
        self,
        socket_path: Optional[str] = None,
        url: Optional[str] = None,
        token: Optional[str] = None,
        cafile: Optional[str] = None,
        timeout: Optional[float] = 300.0,
    ) -> None:
        if socket_path is None and url is None:
            url = os.environ.get("SMOL_URL") or None
            if token is None:
                token = os.environ.get("SMOL_TOKEN") or None
        self._t = Transport(socket_path=socket_path, url=url, token=token, cafile=cafile, timeout=timeout)
        self.machines = Machines(self._t)

    def __repr__(self) -> str:
        return f"Smol({self._t.where!r})"

    def health(self) -> Dict[str, Any]:
        out: Dict[str, Any] = self._t.json("GET", "/v1/health")
        return out

    def run(
        self,
        argv: Sequence[str],
        image: Optional[str] = None,
        smolfile: Union[str, Mapping[str, Any], None] = None,
        env: Optional[Mapping[str, str]] = None,
        workdir: Optional[str] = None,
        memory: Union[int, str, None] = None,
        cpus: Optional[int] = None,
        timeout: Optional[float] = None,
        stdin: Union[bytes, str, None] = None,
    ) -> ExecResult:
        """Run one command in a throwaway machine (made and removed by the server); output as exact bytes."""
        body = exec_body(argv, env, workdir, timeout, stdin)
        body["encoding"] = "base64"
        for key, value in (("image", image), ("memory", memory), ("cpus", cpus)):
            if value is not None:
                body[key] = value
        if smolfile is not None:
            body["smolfile"] = smolfile if isinstance(smolfile, str) else dict(smolfile)
        # a throwaway machine boots first: give the socket the boot's time too
        wait = None if timeout is None else timeout + 30.0 + (self._t.timeout or 0)
        return exec_result(self._t.json("POST", "/v1/run", json_body=body, timeout=wait), b64=True)

    def fork_point(self, point: str, count: Optional[int] = None, names: Optional[Sequence[str]] = None,
                   name_prefix: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                   labels: Optional[Mapping[str, str]] = None) -> Clones:
        """Clones from a saved fork point (`Machine.save_point`); the machine it came from is not touched."""
        body: Dict[str, Any] = {}
        for key, value in (("count", count), ("namePrefix", name_prefix)):
            if value is not None:
                body[key] = value
        if names:
            body["names"] = list(names)
        if env:
            body["env"] = dict(env)
        if labels:
            body["labels"] = dict(labels)
        return clones_of(self._t, self._t.json("POST", f"/v1/points/{seg(point)}/fork", json_body=body))

    def events(self) -> Iterator[MachineEvent]:
        """Lifecycle changes of every machine (API and CLI alike) as they happen, until closed."""
        conn, resp = self._t.open("GET", "/v1/events", headers={"Accept": "text/event-stream"}, timeout=None)
        try:
            parser = SseParser()
            for chunk in iter_body(resp):
                for ev in parser.feed(chunk):
                    if ev.event == "error":
                        raise error_from_body(0, _json_event(ev.data, "events"))
                    if ev.event != "machine":
                        continue
                    d = _json_event(ev.data, "events")
                    yield MachineEvent(str(d.get("name", "")), str(d.get("id", "")), str(d.get("state", "")),
                                       d.get("previous") if isinstance(d.get("previous"), str) else None,
                                       str(d.get("at", "")))
        finally:
            conn.close()

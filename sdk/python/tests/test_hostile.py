"""The SDK against a hostile or dying server: a real socket with canned answers, no smol needed."""
import os
import socket
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from smol import Machine, MachineInfo, Smol, SmolApiError, SmolConnectionError, SmolProtocolError  # noqa: E402
from smol.errors import Unavailable  # noqa: E402


class CannedServer:
    """Answers every connection on a Unix socket with `answer` (bytes, or a callable given the socket)."""

    def __init__(self, answer):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "s.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self._read_request(conn)
                try:
                    self.answer(conn) if callable(self.answer) else conn.sendall(self.answer)
                except OSError:
                    pass  # the client left first: what some tests want

    @staticmethod
    def _read_request(conn):
        # the whole request, body included: answering and closing before the client sent its body breaks its pipe
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                return
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(body) < length:
            more = conn.recv(65536)
            if not more:
                return
            body += more

    def close(self):
        self.sock.close()
        self.dir.cleanup()


def machine(client: Smol) -> Machine:
    return Machine(client._t, MachineInfo.from_json({"name": "m", "id": "1", "state": "running"}))


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class HostileServerTest(unittest.TestCase):
    def serve(self, answer) -> Smol:
        srv = CannedServer(answer)
        self.addCleanup(srv.close)
        return Smol(socket_path=srv.path, timeout=10)

    def test_a_server_dying_mid_stream_is_a_connection_error(self):
        client = self.serve(SSE_HEAD + chunk(b'event: stdout\ndata: {"data":"aGk="}\n\n') + b"ff\r\npartial")
        s = machine(client).exec_stream(["true"])
        self.assertEqual(next(iter(s)), ("stdout", b"hi"))
        with self.assertRaises(SmolConnectionError):
            s.result

    def test_a_stream_ending_without_exit_is_a_protocol_error(self):
        client = self.serve(SSE_HEAD + chunk(b'event: stdout\ndata: {"data":""}\n\n') + b"0\r\n\r\n")
        with self.assertRaises(SmolProtocolError):
            machine(client).exec_stream(["true"]).result

    def test_an_endless_event_line_is_cut_off_at_the_cap(self):
        def endless(conn):
            conn.sendall(SSE_HEAD)
            for _ in range(4096):  # 256 MiB if nobody stops reading
                conn.sendall(chunk(b"A" * 65536))
        client = self.serve(endless)
        with self.assertRaises(SmolProtocolError) as ctx:
            machine(client).exec_stream(["true"]).result
        self.assertIn("cap", str(ctx.exception))

    def test_a_declared_huge_body_is_refused_before_reading_it(self):
        client = self.serve(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 999999999999\r\n\r\n{")
        with self.assertRaises(SmolProtocolError):
            client.machines.list()

    def test_an_error_without_the_error_shape_still_maps_by_status(self):
        client = self.serve(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 11\r\n\r\nbad gateway")
        with self.assertRaises(Unavailable) as ctx:
            client.health()
        self.assertEqual((ctx.exception.status, ctx.exception.code), (503, "http_503"))
        self.assertIn("bad gateway", str(ctx.exception))

    def test_an_error_event_mid_stream_raises_its_class(self):
        body = b'event: error\ndata: {"error":{"code":"guest_channel","message":"qemu died","exitCode":72}}\n\n'
        client = self.serve(SSE_HEAD + chunk(body) + b"0\r\n\r\n")
        with self.assertRaises(SmolApiError) as ctx:
            machine(client).exec_stream(["true"]).result
        self.assertEqual((type(ctx.exception).__name__, ctx.exception.exit_code), ("GuestChannel", 72))

    def test_answers_of_the_wrong_shape_are_protocol_errors(self):
        # a hostile or broken server picks the JSON; the caller still gets one of the SDK's errors
        def json_answer(body: bytes) -> bytes:
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
            return head + body
        for body in (b"[1, 2]", b'{"machines": [1]}', b'{"machines": "x"}'):
            with self.subTest(body=body), self.assertRaises(SmolProtocolError):
                self.serve(json_answer(body)).machines.list()
        with self.assertRaises(SmolProtocolError):
            self.serve(json_answer(b'"m"')).machines.get("m")
        for body in (b'{"exitCode": 0, "stdout": 5}', b'{"exitCode": 0, "stdout": "%%%"}'):
            with self.subTest(body=body), self.assertRaises(SmolProtocolError):
                machine(self.serve(json_answer(body))).exec(["true"])


if __name__ == "__main__":
    unittest.main()

"""
The SDK against a real `smol serve` (real QEMU): one machine for the whole file.

SMOL_TEST_SOCKET names the server's Unix socket; SMOL_TEST_URL and SMOL_TEST_TOKEN a TCP listener with tokens
(for the 401 case). Without SMOL_TEST_SOCKET these tests are skipped: test/integration/api/python-sdk.test.ts
starts the server and sets them.
"""
import json
import os
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import smol  # noqa: E402
from smol import Conflict, InvalidInput, NotFound, Smol, SmolApiError, SmolConnectionError, Unauthorized  # noqa: E402

SOCKET = os.environ.get("SMOL_TEST_SOCKET")
URL = os.environ.get("SMOL_TEST_URL")
TOKEN = os.environ.get("SMOL_TEST_TOKEN")
CAFILE = os.environ.get("SMOL_TEST_CAFILE") or None  # the CA of an https:// SMOL_TEST_URL
IMAGE = os.environ.get("SMOL_TEST_IMAGE") or None
TAG = uuid.uuid4().hex[:8]
OPENAPI = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "openapi.json")


def served(method: str, route: str) -> bool:
    """Whether the checked-in OpenAPI document has the route: routes still being built are skipped, not failed."""
    if os.environ.get("SMOL_TEST_ALL_ROUTES"):
        return True
    try:
        with open(OPENAPI, encoding="utf-8") as f:
            return method.lower() in json.load(f)["paths"].get(route, {})
    except OSError:
        return True  # outside the repository: try everything


@unittest.skipUnless(SOCKET, "needs a running `smol serve`: set SMOL_TEST_SOCKET (python-sdk.test.ts does)")
class MachineTest(unittest.TestCase):
    client: Smol
    m: smol.Machine

    @classmethod
    def setUpClass(cls):
        cls.client = Smol(socket_path=SOCKET)
        cls.m = cls.client.machines.create(image=IMAGE, name=f"py-{TAG}", labels={"sdk": f"py-{TAG}"},
                                           workdir="/tmp", env={"FROM_MACHINE": "yes"})

    @classmethod
    def tearDownClass(cls):
        cls.m.remove()

    def test_create_gives_a_running_machine(self):
        self.assertEqual(self.m.name, f"py-{TAG}")
        self.assertEqual(self.m.state, "running")
        self.assertEqual(self.client.machines.get(self.m.name).id, self.m.id)

    def test_exec_buffers_output_exit_code_env_workdir_and_stdin(self):
        r = self.m.exec(["sh", "-c", 'echo "$A $FROM_MACHINE"; pwd; cat; echo err >&2; exit 3'],
                        env={"A": "a"}, stdin="in\n")
        self.assertEqual((r.exit_code, r.text, r.err), (3, "a yes\n/tmp\nin\n", "err\n"))
        self.assertFalse(r.ok)
        self.assertEqual(self.m.exec(["pwd"], workdir="/").text, "/\n")

    def test_run_makes_and_removes_a_throwaway_machine(self):
        r = self.client.run(["sh", "-c", 'echo "$R"; cat; printf "\\377"; exit 4'], env={"R": "run"}, stdin="in\n")
        self.assertEqual((r.exit_code, r.stdout), (4, b"run\nin\n\xff"))
        self.assertEqual([m.name for m in self.client.machines.list() if m.name.startswith("vm-")], [])

    def test_exec_gives_exact_bytes(self):
        r = self.m.exec(["sh", "-c", r"printf '\377\000\001'"])
        self.assertEqual(r.stdout, b"\xff\x00\x01")

    def test_exec_stream_yields_chunks_then_the_result(self):
        s = self.m.exec_stream(["sh", "-c", "for i in 1 2 3; do echo $i; done; echo oops >&2; exit 5"])
        got = {"stdout": b"", "stderr": b""}
        for stream, data in s:
            got[stream] += data
        self.assertEqual(got, {"stdout": b"1\n2\n3\n", "stderr": b"oops\n"})
        self.assertEqual((s.result.exit_code, s.result.ok), (5, False))

    def test_exec_stream_of_several_mebibytes_arrives_whole(self):
        with self.m.exec_stream(["head", "-c", str(4 << 20), "/dev/zero"]) as s:
            total = sum(len(d) for stream, d in s if stream == "stdout")
        self.assertEqual((total, s.result.exit_code), (4 << 20, 0))

    def test_leaving_an_exec_stream_early_kills_the_command(self):
        with self.m.exec_stream(["sh", "-c", "echo started; exec sleep 300"]) as s:
            self.assertEqual(next(iter(s)), ("stdout", b"started\n"))
        count = ["sh", "-c", "ps -o pid,args | grep -c '[s]leep 300' || true"]
        deadline = time.monotonic() + 20
        while self.m.exec(count).text.strip() != "0":
            self.assertLess(time.monotonic(), deadline, "the guest command outlived the closed stream")
            time.sleep(0.5)

    @unittest.skipUnless(served("get", "/v1/events"), "the server has no events route yet")
    def test_events_report_a_machine_made_and_removed(self):
        seen = []
        name = f"py-ev-{TAG}"

        def watch():
            for ev in self.client.events():
                if ev.name == name:
                    seen.append(ev.state)
                if "removed" in seen:
                    return
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        time.sleep(1)  # the stream is open before the machine is made
        made = self.client.machines.create(image=IMAGE, name=name, start=False)
        time.sleep(1.5)  # the server polls the machine DB: a machine gone before a poll is never seen
        made.remove()
        t.join(30)
        self.assertEqual(seen[-2:], ["stopped", "removed"], seen)  # "creating" may come first

    @unittest.skipUnless(served("put", "/v1/machines/{name}/files"), "the server has no files routes yet")
    def test_files_write_read_list(self):
        self.assertEqual(self.m.files.write("/tmp/sdk/a.txt", "hello\n", mode=0o600), 6)
        self.m.files.write("/tmp/sdk/b.bin", bytes(range(256)))
        self.assertEqual(self.m.files.read("/tmp/sdk/b.bin"), bytes(range(256)))
        self.assertEqual(self.m.files.read_text("/tmp/sdk/a.txt"), "hello\n")
        entries = {e.name: e for e in self.m.files.list("/tmp/sdk")}
        self.assertEqual(sorted(entries), ["a.txt", "b.bin"])
        self.assertEqual((entries["a.txt"].type, entries["a.txt"].size, entries["a.txt"].mode & 0o777), ("file", 6, 0o600))
        with self.assertRaises(NotFound):
            self.m.files.read("/tmp/sdk/missing")
        with self.assertRaises(InvalidInput):
            self.m.files.read("relative/path")

    def test_pause_and_resume_keep_the_guest_as_it_was(self):
        self.m.exec(["sh", "-c", "echo kept > /dev/shm/pause"])
        for to_disk in (False, True):
            self.assertEqual(self.m.pause(to_disk=to_disk).state, "paused")
            with self.assertRaises(Conflict):
                self.m.exec(["true"])
            self.assertEqual(self.m.resume().state, "running")
            self.assertEqual(self.m.exec(["cat", "/dev/shm/pause"]).text, "kept\n", f"to_disk={to_disk}")

    @unittest.skipUnless(served("get", "/v1/machines/{name}/logs"), "the server has no logs route yet")
    def test_logs_iterate_console_lines(self):
        self.m.exec(["sh", "-c", f"echo sdk-log-{TAG} > /dev/console"])
        self.assertIn(f"sdk-log-{TAG}", list(self.m.logs(follow=False)))
        follow = self.m.logs(follow=True, tail=1)
        self.assertEqual(next(follow), f"sdk-log-{TAG}")
        follow.close()  # type: ignore[attr-defined]

    def test_list_filters_by_labels(self):
        names = [m.name for m in self.client.machines.list(labels={"sdk": f"py-{TAG}"})]
        self.assertEqual(names, [self.m.name])
        self.assertEqual(self.client.machines.list(labels={"sdk": "no-such-team"}), [])
        self.assertIn(self.m.name, [m.name for m in self.client.machines.list(state="running")])

    def test_errors_carry_code_exit_code_and_status(self):
        with self.assertRaises(NotFound) as ctx:
            self.client.machines.get(f"missing-{TAG}")
        e = ctx.exception
        self.assertEqual((e.code, e.status, e.exit_code), ("not_found", 404, 66))
        self.assertIsInstance(e, SmolApiError)
        with self.assertRaises(InvalidInput) as bad:
            self.client.machines.create(image=IMAGE, memory="lots", start=False)
        self.assertEqual(bad.exception.status, 400)
        self.assertIn("memory", [i.get("path") for i in bad.exception.issues])

    def test_context_manager_removes_the_machine_and_exec_on_a_stopped_one_conflicts(self):
        name = f"py-cm-{TAG}"
        with self.client.machines.create(image=IMAGE, name=name, start=False) as m:
            self.assertEqual(m.state, "stopped")
            with self.assertRaises(Conflict) as ctx:
                m.exec(["true"])
            self.assertEqual(ctx.exception.exit_code, 67)
        with self.assertRaises(NotFound):
            self.client.machines.get(name)

    def test_a_socket_nobody_listens_on_is_a_connection_error(self):
        with self.assertRaises(SmolConnectionError) as ctx:
            Smol(socket_path=SOCKET + ".nobody").health()
        self.assertIn("smol serve", str(ctx.exception))


@unittest.skipUnless(URL and TOKEN, "needs `smol serve --listen` with a token file: set SMOL_TEST_URL and SMOL_TEST_TOKEN")
class TcpAuthTest(unittest.TestCase):
    def client(self, token):
        return Smol(url=URL, token=token, cafile=CAFILE)

    def test_the_right_token_is_let_in(self):
        self.assertIsInstance(self.client(TOKEN).machines.list(), list)

    def test_a_wrong_or_missing_token_is_401(self):
        for token in ("wrong-" + TOKEN, None):
            with self.assertRaises(Unauthorized) as ctx:
                self.client(token).machines.list()
            self.assertEqual((ctx.exception.status, ctx.exception.code), (401, "unauthorized"))

    def test_health_needs_no_token(self):
        self.assertTrue(self.client(None).health()["ok"])

    @unittest.skipUnless(URL and URL.startswith("https:") and CAFILE, "needs an https:// SMOL_TEST_URL and SMOL_TEST_CAFILE")
    def test_https_trusts_only_the_ca_given(self):
        with self.assertRaises(SmolConnectionError) as ctx:
            Smol(url=URL, token=TOKEN).machines.list()  # the system's CAs do not know the test CA
        self.assertIn("CERTIFICATE_VERIFY_FAILED", str(ctx.exception))
        self.assertEqual(self.client(TOKEN).health()["ok"], True)


if __name__ == "__main__":
    unittest.main()

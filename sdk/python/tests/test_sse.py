"""The SSE parser alone, with hostile streams: no server needed."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from smol import SmolProtocolError  # noqa: E402
from smol.sse import SseEvent, SseParser  # noqa: E402


def parse(stream: bytes, split: int = 0, **caps: int):
    p = SseParser(**caps)
    if not split:
        return p.feed(stream)
    out = []
    for i in range(0, len(stream), split):
        out += p.feed(stream[i:i + split])
    return out


class SseParserTest(unittest.TestCase):
    def test_events_fields_and_comments(self):
        stream = b": ping\nevent: stdout\ndata: {\"a\":1}\n\nretry: 5\nid: 7\ndata:x\ndata: y\n\n"
        self.assertEqual(parse(stream), [SseEvent("stdout", '{"a":1}'), SseEvent("message", "x\ny", "7")])

    def test_every_split_and_every_line_ending_gives_the_same_events(self):
        want = [SseEvent("exit", '{"exitCode":0}'), SseEvent("message", "two")]
        for eol in (b"\n", b"\r\n", b"\r"):
            stream = b"\xef\xbb\xbfevent: exit" + eol + b"data: {\"exitCode\":0}" + eol + eol + b"data: two" + eol + eol
            for split in range(1, len(stream) + 1):
                self.assertEqual(parse(stream, split), want, f"eol={eol!r} split={split}")

    def test_a_bom_split_across_feeds_then_a_blank_line(self):
        for split in (1, 2):
            self.assertEqual(parse(b"\xef\xbb\xbf\ndata: a\n\n", split), [SseEvent("message", "a")])
            self.assertEqual(parse(b"\xef\xbb\xbfdata: a\n\n", split), [SseEvent("message", "a")])

    def test_an_event_cut_off_by_the_end_is_not_given(self):
        self.assertEqual(parse(b"data: whole\n\ndata: half"), [SseEvent("message", "whole")])

    def test_an_endless_line_is_refused_at_the_cap_without_buffering_it_all(self):
        p = SseParser(max_line=64 * 1024)
        with self.assertRaises(SmolProtocolError) as ctx:
            for fed in range(10_000):  # 640 MiB if the parser kept it
                p.feed(b"data: " + b"A" * 65536)
                self.assertLess(fed, 2, "the parser kept buffering past its line cap")
        self.assertIn("line", str(ctx.exception))

    def test_a_huge_event_of_many_small_lines_is_refused(self):
        p = SseParser(max_event=1024 * 1024)
        with self.assertRaises(SmolProtocolError) as ctx:
            for _ in range(1_000_000):
                p.feed(b"data: " + b"B" * 1000 + b"\n")
        self.assertIn("event", str(ctx.exception))

    def test_invalid_utf8_and_nul_do_not_break_it(self):
        out = parse(b"data: \xff\xfe\x00ok\nid: a\x00b\n\n")
        self.assertEqual(len(out), 1)
        self.assertTrue(out[0].data.endswith("\x00ok"))
        self.assertIsNone(out[0].id)  # an id with NUL is ignored, as the spec says


if __name__ == "__main__":
    unittest.main()

import { describe, expect, it } from 'vitest';
import { TerminalSafeDecoder, terminalSafe } from '../../../src/util/terminal-safe.js';

describe('terminalSafe', () => {
  it('shows C0, DEL, C1 and bidi overrides as escapes and keeps text, newlines and tabs', () => {
    expect(terminalSafe('a\x1b]52;c;eA==\x07b\tc\n')).toBe('a\\x1b]52;c;eA==\\x07b\tc\n');
    expect(terminalSafe('\x00\x7f\u009b\u202e\u2066ok é 日本')).toBe('\\x00\\x7f\\u009b\\u202e\\u2066ok é 日本');
    expect(terminalSafe('line\r\nover\rwrite')).toBe('line\nover\\x0dwrite');
  });

  it('decodes a stream whose UTF-8 characters and CRLFs are split across chunks', () => {
    const d = new TerminalSafeDecoder();
    const bytes = Buffer.from('a\r\n日\x1b[2J\r');
    let out = '';
    for (const b of bytes) out += d.write(Buffer.from([b]));
    out += d.end();
    expect(out).toBe('a\n日\\x1b[2J\\x0d');
  });
});

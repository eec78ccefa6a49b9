/**
 * Error messages carry guest text: a boot error's hint is the guest console's last lines, an agent's ERROR
 * frame or a guest tar's stderr becomes a message. A guest writes any bytes there, so what reaches the
 * terminal must not act on it (issue 31).
 */
import { describe, expect, it } from 'vitest';
import { BootError, GuestChannelError, ValidationError } from '../../../src/errors/index.js';
import { handleError } from '../../../src/cli/handle-error.js';

function stderrOf(err: unknown, json = false): { code: number; text: string } {
  let text = '';
  const write = process.stderr.write;
  process.stderr.write = ((c: string | Uint8Array) => { text += c.toString(); return true; }) as typeof process.stderr.write;
  try {
    return { code: handleError(err, json), text };
  } finally {
    process.stderr.write = write;
  }
}

const osc52 = '\x1b]52;c;cm0gLXJmIH4K\x07';

describe('handleError with guest text in an error', () => {
  it('escapes control sequences in the message, where, hint and issues, keeping the lines', () => {
    const boot = stderrOf(new BootError(`boot failed: agent said ${osc52}`, { where: 'm\x1b[2J', hint: `Console output:\nok\r\n\x1b]0;title\x07\n` }));
    expect(boot.code).toBe(71);
    // the only ESC bytes left are chalk's own colours around the labels, if any
    expect(boot.text.replace(/\x1b\[[0-9;]*m/g, '')).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/); // eslint-disable-line no-control-regex
    expect(boot.text).toContain('agent said \\x1b]52;c;cm0gLXJmIH4K\\x07');
    expect(boot.text).toContain('m\\x1b[2J');
    expect(boot.text).toContain('Console output:\nok\n\\x1b]0;title\\x07\n');
    const v = stderrOf(new ValidationError('bad', [{ path: 'a\x07', message: `b${osc52}` }]));
    expect(v.text).toContain('a\\x07');
    expect(v.text).toContain('b\\x1b]52');
  });

  it('leaves --json alone: JSON already escapes control characters', () => {
    const { text } = stderrOf(new GuestChannelError(`x${osc52}`), true);
    expect(JSON.parse(text).error.message).toBe(`x${osc52}`);
    expect(text).not.toContain('\x1b');
  });
});

import { describe, expect, it } from 'vitest';
import { colorLevel, spinnerTerminal } from '../../../src/cli/color.js';

const tty = { isTTY: true }, pipe = { isTTY: false };

describe('colour policy', () => {
  it('colours a terminal, never a pipe', () => {
    expect(colorLevel(tty, {}, 2)).toBe(2);
    expect(colorLevel(pipe, {}, 2)).toBe(0);
    expect(colorLevel(tty, { TERM: 'dumb' }, 2)).toBe(0);
  });
  it('NO_COLOR turns it off even on a terminal; an empty NO_COLOR does not', () => {
    expect(colorLevel(tty, { NO_COLOR: '1' }, 3)).toBe(0);
    expect(colorLevel(tty, { NO_COLOR: '' }, 3)).toBe(3);
  });
  it('FORCE_COLOR wins over NO_COLOR and a pipe', () => {
    expect(colorLevel(pipe, { FORCE_COLOR: '1', NO_COLOR: '1' })).toBe(1);
    expect(colorLevel(pipe, { FORCE_COLOR: '' })).toBe(1);
    expect(colorLevel(pipe, { FORCE_COLOR: '3' })).toBe(3);
    expect(colorLevel(tty, { FORCE_COLOR: '0' }, 2)).toBe(0);
    expect(colorLevel(tty, { FORCE_COLOR: 'false' }, 2)).toBe(0);
  });
});

describe('spinnerTerminal', () => {
  it('wants a terminal that reports its width', () => {
    expect(spinnerTerminal({ isTTY: true, columns: 80 })).toBe(true);
    expect(spinnerTerminal({ isTTY: true, columns: 0 })).toBe(false);
    expect(spinnerTerminal({ isTTY: true })).toBe(false);
    expect(spinnerTerminal({ isTTY: false, columns: 80 })).toBe(false);
  });
});

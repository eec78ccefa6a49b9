/** Colour reaches a terminal only: a pipe gets plain text unless FORCE_COLOR asks otherwise (#20.6). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smol } from '../../helpers/cli.js';

const ESC = '\x1b[';
let home: string;
beforeAll(async () => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-color-'));
  const c = await smol(['machine', 'create', 'tinted'], { home });
  expect(c.code, c.stderr).toBe(0);
});
afterAll(async () => { await smol(['machine', 'rm', 'tinted'], { home }); fs.rmSync(home, { recursive: true, force: true }); });

describe('colour in pipes', () => {
  it('a table into a pipe has no escapes, with NO_COLOR unset too', async () => {
    const r = await smol(['machine', 'ls'], { home, env: { NO_COLOR: undefined, FORCE_COLOR: undefined } });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('tinted');
    expect(r.stdout).not.toContain(ESC);
  });
  it('FORCE_COLOR=1 colours even a pipe; NO_COLOR does not beat it', async () => {
    const r = await smol(['machine', 'ls'], { home, env: { FORCE_COLOR: '1', NO_COLOR: '1' } });
    expect(r.stdout).toContain(ESC);
  });
  it('errors on a piped stderr are plain', async () => {
    const r = await smol(['machine', 'status', 'nosuch'], { home, env: { NO_COLOR: undefined, FORCE_COLOR: undefined } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/error:/);
    expect(r.stderr).not.toContain(ESC);
  });
});

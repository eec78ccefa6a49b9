/** Hostile Smolfiles (issue 31): each is invalid input (65) naming the file and field, never a crash (70) or a memory blow-up. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { register as registerConvert } from '../../../src/cli/commands/smolfile/convert.js';
import { ValidationError } from '../../../src/errors/index.js';
import { loadSmolfile, parseSmolfile } from '../../../src/smolfile/load.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-smolfile-limits-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function failure(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('hostile Smolfiles', () => {
  it('refuses a YAML alias bomb naming the file, without expanding it', () => {
    const levels = ['x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
    for (let i = 1; i < 9; i++) levels.push(`x${i}: &a${i} [${Array(9).fill(`*a${i - 1}`).join(', ')}]`);
    const e = failure(() => parseSmolfile(`${levels.join('\n')}\nenv: { A: *a8 }\n`, 'Smolfile'));
    expect(e).toMatchObject({ exitCode: 65, where: 'Smolfile', message: expect.stringMatching(/aliases/) });
    // an alias naming no anchor is bad YAML, not a bug in smol
    expect(failure(() => parseSmolfile('env: { A: *nowhere }\n', 'Smolfile')).exitCode).toBe(65);
    expect(parseSmolfile('memory: &m 512\ndisk: *m\n').disk).toBe(512);
  });

  it('refuses a file larger than 256 KiB before reading it whole', () => {
    const big = path.join(dir, 'big.yaml');
    fs.writeFileSync(big, `cpus: 1\n# ${'x'.repeat(256 * 1024)}\n`);
    expect(failure(() => loadSmolfile(big))).toMatchObject({ exitCode: 65, where: big, message: expect.stringMatching(/larger than 256 KiB/) });
    expect(failure(() => loadSmolfile('/dev/zero')).exitCode).toBe(65);
    expect(() => loadSmolfile(path.join(dir, 'missing'))).toThrow(expect.objectContaining({ exitCode: 66 }));
  });

  it('holds `smol smolfile convert` to the same limit', async () => {
    const big = path.join(dir, 'big.toml');
    fs.writeFileSync(big, `cpus = 1\n# ${'x'.repeat(256 * 1024)}\n`);
    const cli = new Command().exitOverride();
    registerConvert(cli);
    await expect(cli.parseAsync(['convert', big], { from: 'user' })).rejects.toMatchObject({ exitCode: 65, message: expect.stringMatching(/larger than 256 KiB/) });
  });

  it('refuses NUL bytes in env values, commands, init and workdir, naming the field', () => {
    const issue = (text: string) => failure(() => parseSmolfile(text, 'Smolfile')).issues[0];
    expect(issue('cpus: 1\nenv:\n  A: "x\\0y"\n')).toEqual({ path: 'Smolfile:3 env.A', message: expect.stringMatching(/NUL/) });
    expect(issue('env: ["A=x\\0y"]\n')).toMatchObject({ path: 'Smolfile:1 env.0', message: expect.stringMatching(/NUL/) });
    expect(issue('command: [sh, "-c\\0x"]\n').path).toBe('Smolfile:1 command.1');
    expect(issue('init: ["echo\\0x"]\n').path).toBe('Smolfile:1 init.0');
    expect(issue('workdir: "/a\\0b"\n').path).toBe('Smolfile:1 workdir');
  });
});

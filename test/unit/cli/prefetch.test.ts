import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { imageDirArg } from '../../../src/cli/prefetch.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-prefetch-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const dir = path.join(tmp, 'rootfs');
fs.mkdirSync(dir);
fs.writeFileSync(path.join(tmp, 'img.tar'), '');
const argv = (...a: string[]) => ['node', 'smol', ...a];

describe('prefetch: the --image directory of a command line', () => {
  it('finds it on run and machine create, in both option spellings, the last one winning', () => {
    expect(imageDirArg(argv('run', '--image', dir, '--', 'true'))).toBe(dir);
    expect(imageDirArg(argv('run', `--image=${dir}`, 'true'))).toBe(dir);
    expect(imageDirArg(argv('machine', 'create', 'db', '--image', dir))).toBe(dir);
    expect(imageDirArg(argv('m', 'create', 'db', '--image', dir))).toBe(dir);
    expect(imageDirArg(argv('run', '--image', 'default', '--image', dir, '--', 'true'))).toBe(dir);
  });

  it('ignores other commands, the guest command\'s own arguments, and what is not a directory', () => {
    expect(imageDirArg(argv('machine', 'exec', 'db', '--image', dir))).toBeNull();
    expect(imageDirArg(argv('run', '--', 'tool', '--image', dir))).toBeNull();
    expect(imageDirArg(argv('run', '--image', path.join(tmp, 'img.tar'), '--', 'true'))).toBeNull();
    expect(imageDirArg(argv('run', '--image', 'debian:bookworm', '--', 'true'))).toBeNull();
    expect(imageDirArg(argv('run', '--', 'true'))).toBeNull();
  });
});

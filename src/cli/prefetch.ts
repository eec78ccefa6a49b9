/**
 * Work a command is sure to need, started before the CLI's own modules load (~0.3 s of CPU on one core,
 * while a second core idles). bin/smol calls this first; it must stay cheap and import nothing heavy, and
 * it never fails: whatever it cannot do is done later, in the ordinary way.
 *
 * Today: `smol run` and `smol machine create` of a `--image DIR` that was hashed before walk the tree's
 * stat fingerprint now (GNU find in a subprocess: vm/image/tree-fingerprint.ts), not beside QEMU's start.
 * An image named only in a Smolfile is walked later, as before.
 */
import fs from 'node:fs';
import path from 'node:path';
import { assetsHome, dataPaths } from '../util/paths.js';
import { startEarlyFingerprint } from '../vm/api/prefetch.js';

export function prefetch(argv: string[]): void {
  try {
    const dir = imageDirArg(argv);
    if (dir && hasCachedDigest(dir)) startEarlyFingerprint(dir);
  } catch {
    // an optimisation only
  }
}

/** The absolute `--image` value of a `run` or `machine create` command line, when it names a directory. */
export function imageDirArg(argv: string[]): string | null {
  const end = argv.indexOf('--');
  const args = argv.slice(2, end < 0 ? undefined : end);
  const words = args.filter((a) => !a.startsWith('-'));
  const cmd = words[0] === 'm' ? 'machine' : words[0];
  if (cmd !== 'run' && !(cmd === 'machine' && words[1] === 'create')) return null;
  let ref: string | undefined;
  // commander keeps the last of a repeated option
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--image') ref = args[++i];
    else if (args[i].startsWith('--image=')) ref = args[i].slice('--image='.length);
  }
  if (!ref) return null;
  const abs = path.resolve(ref);
  return fs.statSync(abs, { throwIfNoEntry: false })?.isDirectory() ? abs : null;
}

function hasCachedDigest(abs: string): boolean {
  const all = JSON.parse(fs.readFileSync(dataPaths(assetsHome()).treeDigests, 'utf8')) as Record<string, unknown>;
  return Object.hasOwn(all, abs);
}

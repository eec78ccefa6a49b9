/**
 * Directories into and out of a machine (`machine cp -r`): a tar stream to or from the guest's tar
 * (busybox or the image's), so modes, symlinks and empty directories survive as they do with `docker cp`.
 * A directory copied onto an existing directory lands inside it, under its own name; onto a path that
 * does not exist, it becomes that path.
 *
 * Out of a guest, the stream is untrusted (guest root may replace its tar, shell or agent): it is
 * extracted by copy-extract.ts into a fresh directory beside the target, never by the host's tar, and
 * then renamed into place or merged into an existing target without following anything there (#31.1).
 */
import fs from 'node:fs';
import { lstat, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ConflictError, SmolError, mapFsError } from '../errors/index.js';
import { spawn } from '../util/exec.js';
import type { ExecHandle, GuestChannel } from './engine.js';
import { CopyGuard, type CopyLimits } from './copy-guard.js';
import { extractUntrusted } from './copy-extract.js';
import { mergeInto } from './copy-merge.js';
import { CP_STDERR_TAIL_BYTES } from './limits.js';

/**
 * The last few KiB of a guest's stderr: enough for its error, and a guest cannot make smol hold more.
 * Never rejects: a copy that failed for another reason may never read it.
 */
async function tail(s: NodeJS.ReadableStream): Promise<string> {
  let t = '';
  try {
    for await (const c of s) t = (t + String(c)).slice(-CP_STDERR_TAIL_BYTES);
  } catch { /* the channel closed: what came is all there is */ }
  return t;
}

function counter(): Transform & { bytes: number } {
  const t = new Transform({ transform(chunk: Buffer, _e, cb) { (t as unknown as { bytes: number }).bytes += chunk.length; cb(null, chunk); } }) as Transform & { bytes: number };
  t.bytes = 0;
  return t;
}

async function guestDone(h: ExecHandle, errText: Promise<string>, what: string): Promise<void> {
  const st = await h.exit;
  if (st.code !== 0) throw new SmolError(`cp failed: ${what} in the guest: ${(await errText).trim() || `exit ${st.code ?? st.signal}`}`);
}

/** Is `p` a directory in the guest? Bounded like a copy: a guest that never answers does not hang smol. */
export async function guestIsDir(ch: GuestChannel, p: string, limits: CopyLimits = {}): Promise<boolean> {
  const guard = new CopyGuard(p, limits);
  try {
    const h = await guard.race(ch.exec({ argv: ['test', '-d', p] }));
    h.stdin.end();
    return (await guard.race(h.exit)).code === 0;
  } finally {
    guard.dispose();
  }
}

export async function copyTreeIn(ch: GuestChannel, hostDir: string, guestDest: string): Promise<number> {
  const script = 'if [ -d "$1" ]; then d="$1/$2"; else d="$1"; fi; mkdir -p "$d" && cd "$d" && exec tar -xf -';
  const h = await ch.exec({ argv: ['sh', '-c', script, 'sh', guestDest, path.basename(path.resolve(hostDir))] });
  const errText = tail(h.stderr);
  h.stdout.resume();
  const { child } = await spawn('tar', ['-C', hostDir, '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const hostErr = tail(child.stderr as Readable);
  const n = counter();
  await pipeline(child.stdout as Readable, n, h.stdin as unknown as Writable);
  const r = await child;
  if (r.exitCode !== 0) throw new SmolError(`cp failed: reading ${hostDir}: ${(await hostErr).trim()}`);
  await guestDone(h, errText, `writing ${guestDest}`);
  return n.bytes;
}

export interface TreeOutOptions extends CopyLimits {
  preserveSpecial?: boolean;
  keepOutsideLinks?: boolean;
  warn?: (line: string) => void;
}

/** The guest's bytes, counted against the guard; the source is destroyed the moment a bound is hit. */
async function* metered(src: Readable, guard: CopyGuard, state: { ended: boolean }): AsyncGenerator<Buffer> {
  const stop = () => src.destroy(guard.signal.reason as Error);
  guard.signal.addEventListener('abort', stop, { once: true });
  try {
    for await (const c of src as AsyncIterable<Buffer>) {
      guard.take(c.length);
      if (guard.signal.aborted) throw guard.signal.reason as Error;
      yield c;
    }
    state.ended = true;
  } finally {
    guard.signal.removeEventListener('abort', stop);
  }
}

export async function copyTreeOut(ch: GuestChannel, guestDir: string, hostDest: string, o: TreeOutOptions = {}): Promise<number> {
  const into = fs.existsSync(hostDest) && fs.statSync(hostDest).isDirectory();
  const target = into ? path.join(hostDest, path.posix.basename(guestDir)) : hostDest;
  const existing = await lstat(target).catch(() => null);
  if (existing && !existing.isDirectory()) {
    throw new ConflictError(`cp failed: ${target} exists and is not a directory`, { hint: 'Remove it or copy to another path; a symlink there is not followed.' });
  }
  // Everything lands in a fresh directory first; a new target appears whole or not at all.
  const staging = `${target}.smol-part-${process.pid}`;
  const guard = new CopyGuard(guestDir, o);
  let h: ExecHandle | undefined;
  try {
    fs.mkdirSync(path.dirname(staging), { recursive: true });
    fs.rmSync(staging, { recursive: true, force: true });
    fs.mkdirSync(staging, { mode: 0o700 });
    h = await guard.race(ch.exec({ argv: ['sh', '-c', 'cd "$1" && exec tar -cf - .', 'sh', guestDir] }));
    h.stdin.end();
    const errText = tail(h.stderr);
    const input = { ended: false };
    try {
      await extractUntrusted(metered(h.stdout as unknown as Readable, guard, input), staging, {
        preserveSpecial: o.preserveSpecial, keepOutsideLinks: o.keepOutsideLinks, limit: guard, warn: o.warn ?? (() => undefined),
      });
    } catch (err) {
      // a guest that could not archive (no such directory) sends nothing: its own words say why
      if (input.ended && !guard.signal.aborted) await guard.race(guestDone(h, errText, `reading ${guestDir}`));
      throw err;
    }
    await guard.race(guestDone(h, errText, `reading ${guestDir}`));
    if (existing) await mergeInto(staging, target);
    else await rename(staging, target);
    return guard.received;
  } catch (err) {
    try { h?.signal('SIGKILL'); } catch { /* it has exited */ }
    throw mapFsError(guard.cause(err), `writing ${target}`);
  } finally {
    guard.dispose();
    await rm(staging, { recursive: true, force: true });
  }
}

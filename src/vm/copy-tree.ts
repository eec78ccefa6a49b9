/**
 * Directories into and out of a machine (`machine cp -r`): a tar stream between the host's GNU tar and
 * the guest's tar (busybox or the image's), so modes, symlinks and empty directories survive as they do
 * with `docker cp`. A directory copied onto an existing directory lands inside it, under its own name;
 * onto a path that does not exist, it becomes that path.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Transform, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SmolError, mapFsError } from '../errors/index.js';
import { spawn } from '../util/exec.js';
import type { ExecHandle, GuestChannel } from './engine.js';

const collect = async (s: NodeJS.ReadableStream): Promise<string> => { let t = ''; for await (const c of s) t += String(c); return t; };

function counter(): Transform & { bytes: number } {
  const t = new Transform({ transform(chunk: Buffer, _e, cb) { (t as unknown as { bytes: number }).bytes += chunk.length; cb(null, chunk); } }) as Transform & { bytes: number };
  t.bytes = 0;
  return t;
}

async function guestDone(h: ExecHandle, errText: Promise<string>, what: string): Promise<void> {
  const st = await h.exit;
  if (st.code !== 0) throw new SmolError(`cp failed: ${what} in the guest: ${(await errText).trim() || `exit ${st.code ?? st.signal}`}`);
}

/** Is `p` a directory in the guest? */
export async function guestIsDir(ch: GuestChannel, p: string): Promise<boolean> {
  const h = await ch.exec({ argv: ['test', '-d', p] });
  h.stdin.end();
  return (await h.exit).code === 0;
}

export async function copyTreeIn(ch: GuestChannel, hostDir: string, guestDest: string): Promise<number> {
  const script = 'if [ -d "$1" ]; then d="$1/$2"; else d="$1"; fi; mkdir -p "$d" && cd "$d" && exec tar -xf -';
  const h = await ch.exec({ argv: ['sh', '-c', script, 'sh', guestDest, path.basename(path.resolve(hostDir))] });
  const errText = collect(h.stderr);
  h.stdout.resume();
  const { child } = await spawn('tar', ['-C', hostDir, '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const hostErr = collect(child.stderr as Readable);
  const n = counter();
  await pipeline(child.stdout as Readable, n, h.stdin as unknown as Writable);
  const r = await child;
  if (r.exitCode !== 0) throw new SmolError(`cp failed: reading ${hostDir}: ${(await hostErr).trim()}`);
  await guestDone(h, errText, `writing ${guestDest}`);
  return n.bytes;
}

export async function copyTreeOut(ch: GuestChannel, guestDir: string, hostDest: string): Promise<number> {
  const into = fs.existsSync(hostDest) && fs.statSync(hostDest).isDirectory();
  const target = into ? path.join(hostDest, path.posix.basename(guestDir)) : hostDest;
  // A new directory appears whole or not at all: it is filled under a temporary name first.
  const fresh = !fs.existsSync(target);
  const work = fresh ? `${target}.smol-part-${process.pid}` : target;
  try {
    fs.mkdirSync(work, { recursive: true });
    const h = await ch.exec({ argv: ['sh', '-c', 'cd "$1" && exec tar -cf - .', 'sh', guestDir] });
    h.stdin.end();
    const errText = collect(h.stderr);
    const { child } = await spawn('tar', ['-C', work, '-xf', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    const hostErr = collect(child.stderr as Readable);
    const n = counter();
    await pipeline(h.stdout as unknown as Readable, n, child.stdin as Writable);
    await guestDone(h, errText, `reading ${guestDir}`);
    const r = await child;
    if (r.exitCode !== 0) throw new SmolError(`cp failed: writing ${target}: ${(await hostErr).trim()}`);
    if (fresh) fs.renameSync(work, target);
    return n.bytes;
  } catch (err) {
    if (fresh) fs.rmSync(work, { recursive: true, force: true });
    throw err instanceof SmolError ? err : mapFsError(err, `writing ${target}`);
  }
}

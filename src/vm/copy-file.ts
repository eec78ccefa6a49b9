/**
 * One file out of a guest (`machine cp MACHINE:/file host`). The guest announces a size and a mode; the
 * agent connection holds it to that size (file-transfer.ts), and here the size is held to --max-size, the
 * mode loses setuid/setgid, silence is bounded, and the `.smol-part` file goes on every way out (#31.3, .7).
 */
import fs, { constants as C } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { mapFsError } from '../errors/index.js';
import type { GuestChannel } from './engine.js';
import { CopyGuard, type CopyLimits } from './copy-guard.js';
import { hostMode } from './copy-policy.js';

export async function copyFileOut(ch: GuestChannel, guestPath: string, hostDest: string, limits: CopyLimits = {}): Promise<number> {
  let target = hostDest;
  if (fs.existsSync(target) && fs.statSync(target).isDirectory()) target = path.join(target, path.posix.basename(guestPath));
  const tmp = `${target}.smol-part-${process.pid}`;
  const guard = new CopyGuard(guestPath, limits);
  let fh: FileHandle | undefined;
  let stream: Readable | undefined;
  const stop = () => stream?.destroy(guard.signal.reason as Error);
  guard.signal.addEventListener('abort', stop, { once: true });
  try {
    const file = await guard.race(ch.getFile(guestPath));
    stream = file.stream as Readable;
    if (file.size > guard.maxBytes) throw guard.overCap();
    await rm(tmp, { force: true });
    // O_EXCL|O_NOFOLLOW: the part file is ours alone, never a name someone linked elsewhere
    fh = await open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, hostMode(file.mode, false));
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      guard.take(chunk.length);
      if (guard.signal.aborted) break;
      await fh.write(chunk);
    }
    if (guard.signal.aborted) throw guard.signal.reason as Error;
    await fh.close();
    fh = undefined;
    await rename(tmp, target);
    return file.size;
  } catch (err) {
    stream?.destroy();
    throw mapFsError(guard.cause(err), `writing ${target}`);
  } finally {
    guard.signal.removeEventListener('abort', stop);
    guard.dispose();
    await fh?.close().catch(() => undefined);
    await rm(tmp, { force: true });
  }
}

/** Running commands and copying files in machines, on top of MachineService's channel. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { InterruptedError, NotFoundError, UserError } from '../errors/index.js';
import type { ExecHandle, ExecRequest, GuestChannel } from './engine.js';
import type { MachineService } from './service.js';
import { attachGpu, type GpuAttachment } from './gpu.js';
import { copyTreeIn, copyTreeOut, guestIsDir, type TreeOutOptions } from './copy-tree.js';
import { copyFileOut } from './copy-file.js';
import { deliverSecrets, resolveSecrets } from './secrets.js';
import { KILL_GRACE_MS } from './limits.js';
import { mergeSecrets, type SecretDecl } from '../smolfile/secrets.js';

export interface ExecIo {
  /** null: the guest command sees EOF on stdin at once. */
  stdin: NodeJS.ReadableStream | null;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  timeoutMs?: number;
  /** Stop waiting for the command: it is killed and the exec fails with InterruptedError. */
  signal?: AbortSignal;
  /** Receives the running command so the caller can forward signals and terminal resizes. */
  onStart?: (h: ExecHandle) => void;
}

export interface ExecResult { code: number | null; signal: string | null; timedOut: boolean }

/** Shell convention: a command killed by signal N exits 128+N; a timeout exits 124. */
export function exitCodeOf(r: ExecResult): number {
  if (r.timedOut) return 124;
  if (r.code !== null) return r.code;
  const n = r.signal ? os.constants.signals[r.signal as NodeJS.Signals] : undefined;
  return 128 + (n ?? 9);
}

export async function execOnChannel(ch: GuestChannel, req: ExecRequest, io: ExecIo): Promise<ExecResult> {
  const h = await ch.exec(req);
  io.onStart?.(h);
  let timedOut = false;
  const timer = io.timeoutMs
    ? setTimeout(() => {
        timedOut = true;
        h.signal('SIGTERM');
        setTimeout(() => h.signal('SIGKILL'), KILL_GRACE_MS).unref();
      }, io.timeoutMs)
    : undefined;
  const drained = (src: NodeJS.ReadableStream, dst: NodeJS.WritableStream) =>
    new Promise<void>((resolve) => {
      src.on('end', resolve);
      src.on('error', () => resolve());
      src.pipe(dst, { end: false });
    });
  if (io.stdin) {
    io.stdin.pipe(h.stdin);
  } else {
    h.stdin.end();
  }
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => { h.signal('SIGKILL'); reject(interrupted(io.signal!)); };
    if (io.signal?.aborted) onAbort();
    else io.signal?.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  try {
    const done = Promise.all([h.exit.catch((err) => notFoundAs127(err, req, io)), drained(h.stdout, io.stdout), drained(h.stderr, io.stderr)]);
    const [res] = await Promise.race([done, aborted]);
    return { ...res, timedOut };
  } finally {
    if (onAbort) io.signal?.removeEventListener('abort', onAbort);
    if (timer) clearTimeout(timer);
    if (io.stdin) io.stdin.unpipe(h.stdin as NodeJS.WritableStream);
  }
}

/** The error an aborted run or exec fails with: the abort's own reason when it is one (130 or 143). */
export function interrupted(signal: AbortSignal): InterruptedError {
  return signal.reason instanceof InterruptedError ? signal.reason : new InterruptedError('interrupted');
}

/** A command that does not exist exits 127, as in a shell, rather than failing smol itself. */
function notFoundAs127(err: unknown, req: ExecRequest, io: ExecIo): { code: number; signal: null } {
  if (!(err instanceof NotFoundError)) throw err;
  io.stderr.write(`smol: ${req.argv[0]}: command not found in the guest\n`);
  return { code: 127, signal: null };
}

/** `secrets`: this exec's own, beyond the machine's declared ones; all are read from the host now (docs/secrets.md). */
export async function execInMachine(svc: MachineService, name: string, req: ExecRequest, io: ExecIo, o: { secrets?: SecretDecl } = {}): Promise<ExecResult> {
  const secrets = resolveSecrets(mergeSecrets(svc.store.get(name).spec.secrets, o.secrets));
  const { rec, ch, release } = await svc.channel(name);
  let gpu: GpuAttachment | undefined;
  try {
    if (rec.spec.gpu) gpu = await attachGpu(ch, { home: svc.home });
    await deliverSecrets(ch, secrets, svc.store, rec);
    // `...req` alone would let a caller's explicit `cwd: undefined` (an absent -w) hide the machine's workdir
    return await execOnChannel(ch, { ...req, cwd: req.cwd ?? rec.spec.workdir, env: { ...rec.spec.env, ...gpu?.env, ...(req.env ?? {}), ...secrets.env } }, io);
  } finally {
    ch.close();
    release();
    await gpu?.close();
  }
}

export interface CopyEnd { machine: string | null; path: string }

/** "name:/path" names a guest path; anything else is a host path. */
export function parseCopyEnd(arg: string): CopyEnd {
  const m = /^([a-zA-Z0-9][a-zA-Z0-9_.-]*):(.*)$/.exec(arg);
  if (m && !arg.startsWith('./') && !arg.startsWith('/')) return { machine: m[1], path: m[2] };
  return { machine: null, path: arg };
}

/** Out of a guest, every bound of TreeOutOptions applies (a single file: size, idle time and the signal). */
export interface CopyOptions extends TreeOutOptions { recursive?: boolean }

export async function copy(svc: MachineService, srcArg: string, dstArg: string, opts: CopyOptions = {}): Promise<{ bytes: number; direction: 'in' | 'out' }> {
  const src = parseCopyEnd(srcArg);
  const dst = parseCopyEnd(dstArg);
  if (!!src.machine === !!dst.machine) {
    throw new UserError('cp needs exactly one guest path written as MACHINE:/path', { hint: 'Examples: smol machine cp ./f.txt vm1:/tmp/f.txt, or smol machine cp vm1:/etc/hostname .' });
  }
  const guest = (src.machine ? src : dst) as { machine: string; path: string };
  if (!guest.path.startsWith('/')) throw new UserError(`guest path must be absolute: ${guest.path}`);
  const { ch, release } = await svc.channel(guest.machine);
  try {
    if (dst.machine) {
      let st: fs.Stats;
      try {
        st = fs.statSync(src.path);
      } catch {
        throw new NotFoundError(`no such file: ${src.path}`);
      }
      if (st.isDirectory()) {
        if (!opts.recursive) throw new UserError(`${src.path} is a directory`, { hint: 'Copy directories with -r: smol machine cp -r DIR MACHINE:/path' });
        return { bytes: await copyTreeIn(ch, src.path, dst.path), direction: 'in' };
      }
      if (!st.isFile()) throw new UserError(`cp copies regular files and, with -r, directories; ${src.path} is neither`);
      const target = dst.path.endsWith('/') ? dst.path + path.basename(src.path) : dst.path;
      await ch.putFile(fs.createReadStream(src.path), target, st.mode & 0o7777);
      return { bytes: st.size, direction: 'in' };
    }
    if (opts.recursive && await guestIsDir(ch, src.path, opts)) return { bytes: await copyTreeOut(ch, src.path, dst.path, opts), direction: 'out' };
    return { bytes: await copyFileOut(ch, src.path, dst.path, opts), direction: 'out' };
  } finally {
    ch.close();
    release();
  }
}

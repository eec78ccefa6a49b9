/**
 * The only module that imports execa (DESIGN.md §7). Everything that starts a subprocess goes through here,
 * so timeouts, signal forwarding and error wording stay consistent.
 */
import { createHash } from 'node:crypto';
import { fork, spawn as spawnChild, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Options, ResultPromise } from 'execa';
import { NoSpaceError, PrerequisiteError, SmolError } from '../errors/index.js';

// execa takes ~100 ms to import; commands that never start a subprocess should not pay for it
let execaModule: Promise<typeof import('execa')> | undefined;
const loadExeca = async () => (await (execaModule ??= import('execa'))).execa;

export interface RunResult { stdout: string; stderr: string; exitCode: number }

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Written to stdin, which then closes; a promise keeps stdin open until it settles (a program started ahead waits for its cue). */
  input?: string | Buffer | Promise<string | Buffer>;
  timeoutMs?: number;
  /** Resolve with the exit code instead of throwing on a non-zero exit. */
  allowFailure?: boolean;
}

/**
 * Run a program to completion and capture its output. Throws SmolError naming the command on failure.
 * Plain child_process, not execa: this is on the path of every `smol run` (QEMU's launch, the RAM copy),
 * and importing execa costs ~140 ms of CPU there, more than QEMU takes to daemonize.
 */
export async function run(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const r = await collect(file, args, opts);
  if (r.exitCode === null) throw new SmolError(`${file} failed: ${r.timedOut ? `timed out after ${opts.timeoutMs} ms` : `killed by ${r.signal}`}`);
  const res = { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode };
  if (res.exitCode !== 0 && !opts.allowFailure) {
    const tail = res.stderr.trim().split('\n').slice(-5).join('\n');
    // tools report a full disk only in words; callers should see the same error as from node's own I/O
    if (/No space left on device|Disk quota exceeded/.test(res.stderr)) {
      throw new NoSpaceError(`${file} ${args.slice(0, 3).join(' ')} failed: no space left on device`, { hint: `Free space and retry. ${tail}` });
    }
    throw new SmolError(`${file} ${args.slice(0, 3).join(' ')} failed (exit ${res.exitCode}): ${tail}`);
  }
  return res;
}

interface Collected { stdout: string; stderr: string; exitCode: number | null; signal: NodeJS.Signals | null; timedOut: boolean }

function collect(file: string, args: readonly string[], opts: RunOptions): Promise<Collected> {
  return new Promise((resolve, reject) => {
    const child = spawnChild(file, args, { cwd: opts.cwd, env: opts.env ? { ...process.env, ...opts.env } : process.env, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [], err: Buffer[] = [];
    let timedOut = false;
    // as execa did: SIGTERM at the deadline, SIGKILL 5 s later if that was not enough
    let force: NodeJS.Timeout | undefined;
    const timer = opts.timeoutMs ? setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      force = setTimeout(() => child.kill('SIGKILL'), 5_000);
    }, opts.timeoutMs) : undefined;
    const done = () => { clearTimeout(timer); clearTimeout(force); };
    child.stdout!.on('data', (b: Buffer) => out.push(b));
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    child.once('error', (e: NodeJS.ErrnoException) => {
      done();
      reject(e.code === 'ENOENT' ? new PrerequisiteError(`${file} not found`, { hint: 'Run `smol setup` (or `npm run setup`) to install prerequisites.' }) : new SmolError(`${file} failed: ${e.message}`));
    });
    // a killed program's children may hold its pipes open: past the deadline its own exit is the end
    child.once('exit', () => { if (timedOut) { child.stdout!.destroy(); child.stderr!.destroy(); } });
    child.once('close', (code, signal) => {
      done();
      resolve({ stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString(), exitCode: code, signal, timedOut });
    });
    if (opts.input !== undefined) {
      child.stdin!.on('error', () => undefined); // a program that exits without reading its input is not an error of ours
      void Promise.resolve(opts.input).then((b) => child.stdin!.end(b), () => child.stdin!.end());
    }
  });
}

/**
 * A short filter run to completion synchronously: `input` on stdin, stdout back as bytes (at most `maxBytes`).
 * For code on a worker thread that answers synchronously (the CUDA session), where awaiting is not an option.
 */
export function filterSync(file: string, args: readonly string[], input: Buffer, o: { timeoutMs?: number; maxBytes?: number } = {}): Buffer {
  const r = spawnSync(file, args, { input, timeout: o.timeoutMs ?? 10_000, maxBuffer: o.maxBytes ?? 64 << 20 });
  if ((r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
    throw new PrerequisiteError(`${file} not found`, { hint: 'Run `smol setup` (or `npm run setup`) to install prerequisites.' });
  }
  if (r.error) throw new SmolError(`${file} failed: ${r.error.message}`);
  if (r.status !== 0) throw new SmolError(`${file} ${args.join(' ')} failed (exit ${r.status ?? r.signal}): ${r.stderr.toString().trim().split('\n').slice(-2).join(' ')}`);
  return r.stdout;
}

export type Child = ResultPromise<Options>;

export interface SpawnOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  stdio?: Options['stdio'];
  detached?: boolean;
}

/**
 * Start a long-lived process (QEMU, a daemon). The caller owns its lifetime. The child comes wrapped:
 * an execa child is a thenable, so returning it bare from an async function would wait for its exit.
 */
export async function spawn(file: string, args: readonly string[], opts: SpawnOptions = {}): Promise<{ child: Child }> {
  const execa = await loadExeca();
  const child = execa(file, args, {
    cwd: opts.cwd,
    env: opts.env,
    extendEnv: true,
    stdio: opts.stdio ?? 'ignore',
    detached: opts.detached ?? false,
    reject: false,
    buffer: false,
    cleanup: !opts.detached,
  }) as Child;
  return { child };
}

/**
 * A Node module in a child process with an IPC channel, for daemons that keep helper processes of their
 * own. `fds` become the child's fds 3, 4, … (e.g. a listening socket it should accept on).
 */
export function forkNode(module: string | URL, o: { execArgv?: string[]; env?: Record<string, string | undefined>; fds?: number[] } = {}): ChildProcess {
  return fork(module, [], {
    execArgv: o.execArgv ?? [], env: { ...process.env, ...o.env },
    stdio: ['ignore', 'inherit', 'inherit', ...(o.fds ?? []), 'ipc'],
  });
}

/**
 * Start a daemon that outlives this process (a machine's network helpers): its own session, stdin from
 * /dev/null, stdout and stderr appended to `outFile` (or discarded), nothing held by this process. Its pid.
 */
export function spawnDaemon(file: string, args: readonly string[], o: { outFile?: string } = {}): number {
  const out = o.outFile ? openSync(o.outFile, 'a') : 'ignore';
  try {
    const child = spawnChild(file, args, { detached: true, stdio: ['ignore', out, out] });
    child.on('error', () => undefined); // a missing program shows as no pid below
    child.unref();
    if (!child.pid) throw new PrerequisiteError(`${file} could not be started`, { hint: 'Run scripts/setup.sh to install prerequisites.' });
    return child.pid;
  } finally {
    if (typeof out === 'number') closeSync(out);
  }
}

/**
 * The SHA-256 of a program's stdout, hashed as it streams (a listing wanted only as a fingerprint), or null
 * when the program is missing or exits non-zero. No execa: this runs at the CLI's launch (cli/prefetch.ts).
 */
export function digestOfOutput(file: string, args: readonly string[], o: { env?: Record<string, string> } = {}): Promise<string | null> {
  return new Promise((resolve) => {
    const h = createHash('sha256');
    const child = spawnChild(file, args, { stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, ...o.env } });
    child.stdout!.on('data', (b: Buffer) => h.update(b));
    child.once('error', () => resolve(null));
    child.once('close', (code) => resolve(code === 0 ? h.digest('hex') : null));
  });
}

/** The path `file` resolves to on PATH (or itself when it is an existing executable path), like `command -v`. */
export async function which(file: string): Promise<string | null> {
  const candidates = file.includes('/') ? [file] : (process.env.PATH ?? '').split(':').filter(Boolean).map((d) => path.join(d, file));
  for (const c of candidates) {
    try {
      await access(c, constants.X_OK);
      if ((await stat(c)).isFile()) return c;
    } catch {
      // not here
    }
  }
  return null;
}

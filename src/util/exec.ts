/**
 * The only module that imports execa (DESIGN.md §7). Everything that starts a subprocess goes through here,
 * so timeouts, signal forwarding and error wording stay consistent.
 */
import { execa, type Options, type ResultPromise } from 'execa';
import { PrerequisiteError, SmolError } from '../errors/index.js';

export interface RunResult { stdout: string; stderr: string; exitCode: number }

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  input?: string | Buffer;
  timeoutMs?: number;
  /** Resolve with the exit code instead of throwing on a non-zero exit. */
  allowFailure?: boolean;
}

/** Run a program to completion and capture its output. Throws SmolError naming the command on failure. */
export async function run(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  try {
    const r = await execa(file, args, {
      cwd: opts.cwd,
      env: opts.env,
      extendEnv: true,
      input: opts.input,
      timeout: opts.timeoutMs,
      reject: false,
      stripFinalNewline: false,
    });
    if (r.failed && r.exitCode === undefined) {
      const code = (r as { code?: string }).code;
      if (code === 'ENOENT') throw new PrerequisiteError(`${file} not found`, { hint: 'Run `smol setup` (or `npm run setup`) to install prerequisites.' });
      throw new SmolError(`${file} failed: ${r.shortMessage ?? 'could not start'}`);
    }
    const res = { stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), exitCode: r.exitCode ?? 1 };
    if (res.exitCode !== 0 && !opts.allowFailure) {
      const tail = res.stderr.trim().split('\n').slice(-5).join('\n');
      throw new SmolError(`${file} ${args.slice(0, 3).join(' ')} failed (exit ${res.exitCode}): ${tail}`);
    }
    return res;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PrerequisiteError(`${file} not found`, { hint: 'Run `smol setup` (or `npm run setup`) to install prerequisites.' });
    }
    throw err;
  }
}

export type Child = ResultPromise<Options>;

export interface SpawnOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  stdio?: Options['stdio'];
  detached?: boolean;
}

/** Start a long-lived process (QEMU, a daemon). The caller owns its lifetime. */
export function spawn(file: string, args: readonly string[], opts: SpawnOptions = {}): Child {
  return execa(file, args, {
    cwd: opts.cwd,
    env: opts.env,
    extendEnv: true,
    stdio: opts.stdio ?? 'ignore',
    detached: opts.detached ?? false,
    reject: false,
    buffer: false,
    cleanup: !opts.detached,
  }) as Child;
}

/** True when `file` can be found on PATH (or is an existing path). */
export async function which(file: string): Promise<string | null> {
  const r = await run('sh', ['-c', `command -v "$1"`, 'sh', file], { allowFailure: true });
  return r.exitCode === 0 ? r.stdout.trim() : null;
}

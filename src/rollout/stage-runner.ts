/**
 * How a CPU stage's command runs. The worker only knows this interface; `process` runs it as a subprocess
 * under prlimit, and the VM runner (vm-stage-runner.ts: a fresh microVM per attempt) plugs in the same way.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PrerequisiteError } from '../errors/index.js';
import { spawn, which, type Child } from '../util/exec.js';
import type { CpuStage } from './manifest.js';
import { STAGE_STDERR_TAIL_CHARS } from './limits.js';
import { withholdSecrets } from './stage-env.js';

export interface StageRun {
  stage: CpuStage;
  /** The input blob's path; also piped to the command's stdin. */
  inputPath: string;
  /** A fresh directory for this attempt; removed by the worker afterwards. */
  workDir: string;
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal;
}

export interface StageOutcome {
  exitCode: number | null;
  signal: string | null;
  /** $SMOL_OUTPUT if the command wrote it, else its stdout. */
  output: Buffer;
  stderrTail: string;
  timedOut: boolean;
  aborted: boolean;
}

export interface StageRunner {
  readonly isolation: 'process' | 'vm';
  run(r: StageRun): Promise<StageOutcome>;
  /** Frees what the runner keeps between attempts (a VM runner's waiting clones); the worker calls it on stop. */
  close?(): Promise<void>;
}

/** prlimit arguments for a stage's limits (RLIMIT_FSIZE caps output; SIGXFSZ kills a runaway writer). */
export function prlimitArgs(l: CpuStage['limits']): string[] {
  const a = [`--fsize=${l.maxOutputBytes}`];
  if (l.cpuSeconds) a.push(`--cpu=${l.cpuSeconds}`);
  if (l.memoryMiB) a.push(`--as=${l.memoryMiB * 1024 * 1024}`);
  if (l.openFiles) a.push(`--nofile=${l.openFiles}`);
  return a;
}

/** The guard's script ($0 is kill(1): dash's builtin cannot signal a process group). */
const GUARD = [
  'groups=" "',
  'while read -r l; do',
  '  case $l in',
  '    +*) groups="$groups${l#+} " ;;',
  '    -*) g=${l#-}; groups="${groups%% $g *} ${groups#* $g }" ;;',
  '  esac',
  'done',
  'set --',
  'for g in $groups; do set -- "$@" "-$g"; done',
  '[ $# -gt 0 ] && exec "$0" -s KILL -- "$@"',
].join('\n');

export class ProcessStageRunner implements StageRunner {
  readonly isolation = 'process' as const;
  /** Wrapped: an execa child is itself a promise (of its result), which `then` would wait for. */
  private guardProc: Promise<{ child: Child } | null> | null = null;
  private constructor(private readonly prlimit: string, private readonly setpriv: string | null, private readonly kill: string | null) {}

  /**
   * The parent-death signal reaches the command only, not what it started in the background. One guard
   * process per runner reads the process groups of running stages from a pipe (`+PGID`, `-PGID`); when the
   * worker dies, even by SIGKILL, the pipe closes and the guard kills the groups still listed. One guard
   * rather than one per stage: a spawn per stage cost 10–15 ms each here (33 → 44–52 ms for `true`).
   */
  private guard(): Promise<{ child: Child } | null> {
    this.guardProc ??= this.kill
      // detached: a non-detached execa child installs exit hooks that re-raise SIGTERM once the worker's
      // own once-listener has run, which killed a gracefully stopping worker
      ? spawn('/bin/sh', ['-c', GUARD, this.kill], { stdio: ['pipe', 'ignore', 'ignore'], detached: true }).then((g) => {
        g.child.unref(); // never what keeps a worker alive
        (g.child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
        return g;
      }, () => null)
      : Promise.resolve(null);
    return this.guardProc;
  }

  static async create(): Promise<ProcessStageRunner> {
    // kill(1), not the shell's: dash's builtin cannot signal a process group
    const [p, sp, k] = await Promise.all([which('prlimit'), which('setpriv'), which('kill')]);
    if (!p) throw new PrerequisiteError('prlimit not found; it enforces stage resource limits', { hint: 'Install util-linux (apt-get install util-linux).' });
    const runner = new ProcessStageRunner(p, sp, k);
    // started now, not with the first stage: a worker killed while the guard was still starting left that
    // stage's background children behind (seen once under CI load)
    await runner.guard();
    return runner;
  }

  /**
   * The command line: prlimit for the limits, under `setpriv --pdeathsig KILL` where util-linux has it. The
   * stage runs in its own process group (so timeouts kill its children), which also means a SIGKILLed worker
   * would leave it running; the parent-death signal survives both execs and kills it with the worker.
   */
  private argv(r: StageRun): [string, string[]] {
    const limited = [...prlimitArgs(r.stage.limits), '--', ...r.stage.command];
    return this.setpriv ? [this.setpriv, ['--pdeathsig', 'KILL', '--', this.prlimit, ...limited]] : [this.prlimit, limited];
  }

  async run(r: StageRun): Promise<StageOutcome> {
    const outPath = path.join(r.workDir, 'output');
    const stdoutPath = path.join(r.workDir, 'stdout');
    const stderrPath = path.join(r.workDir, 'stderr');
    let timedOut = false;
    let aborted = false;
    // its own process group, so a timeout or cancel kills the command's children too
    const [file, args] = this.argv(r);
    const { child } = await spawn(file, args, {
      cwd: r.workDir, env: { ...withholdSecrets(), ...r.stage.env, ...r.env, SMOL_OUTPUT: outPath }, stdio: [{ file: r.inputPath }, { file: stdoutPath }, { file: stderrPath }], detached: true,
    });
    const killGroup = () => {
      try { if (child.pid) process.kill(-child.pid, 'SIGKILL'); } catch { /* already gone */ }
    };
    const guard = child.pid ? (await this.guard())?.child : undefined;
    guard?.stdin?.write(`+${child.pid}\n`);
    const timer = setTimeout(() => { timedOut = true; killGroup(); }, r.timeoutMs);
    const onAbort = () => { aborted = true; killGroup(); };
    r.signal.addEventListener('abort', onAbort, { once: true });
    if (r.signal.aborted) onAbort();
    try {
      const res = await child;
      const output = fs.existsSync(outPath) ? fs.readFileSync(outPath) : fs.readFileSync(stdoutPath);
      const stderr = fs.readFileSync(stderrPath, 'utf8');
      return {
        exitCode: res.exitCode ?? null, signal: res.signal ?? null, output,
        stderrTail: stderr.trim().split('\n').slice(-5).join('\n').slice(-STAGE_STDERR_TAIL_CHARS), timedOut, aborted,
      };
    } finally {
      clearTimeout(timer);
      r.signal.removeEventListener('abort', onAbort);
      killGroup(); // stray background children of the command do not outlive the attempt
      guard?.stdin?.write(`-${child.pid}\n`);
    }
  }
}

/**
 * The VM runner needs the machine service, which only the CLI (or an embedding program) builds, so it is
 * passed in; asking for vm isolation without one fails clearly rather than silently running as a process.
 */
export async function createStageRunner(isolation: 'process' | 'vm', injected?: StageRunner): Promise<StageRunner> {
  if (injected) return injected;
  if (isolation === 'vm') {
    throw new PrerequisiteError('--isolation vm is not available: no VM stage runner is wired in', {
      hint: 'Use --isolation process, or run a smol build whose worker has the microVM stage runner.',
    });
  }
  return ProcessStageRunner.create();
}

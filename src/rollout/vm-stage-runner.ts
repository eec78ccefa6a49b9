/**
 * `--isolation vm`: each attempt runs in a fresh microVM. With a fork point (saved, or saved once from a warm
 * machine, or pulled from a registry by digest and saved once per host, vm-artifact.ts: one point per warm
 * environment, reused by every worker and every restart) the attempt starts one clone from it, which pauses nothing; otherwise it restores a throwaway machine from the boot snapshot
 * (runEphemeral). Either way the VM exists for this attempt only and is removed however it ends.
 *
 * The input goes in on the command's stdin through the guest channel and the output comes back on stdout,
 * so both paths share one small guest-side wrapper (below) and the worker stores the output by digest
 * exactly as for process isolation. A deadline or cancel kills the VM's QEMU: a stuck guest cannot hold
 * the attempt, and nothing of it survives.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { Writable } from 'node:stream';
import { ConflictError, ForkError, NotFoundError, TimeoutError } from '../errors/index.js';
import type { Smolfile } from '../smolfile/schema.js';
import type { ExecHandle, ExecIo, ExecRequest, ExecResult } from '../vm/api/exec.js';
import { forkMachine, ForkPointPool, saveForkPoint, type PreparedClone } from '../vm/api/fork.js';
import { ForkPointStore, pidAlive, type MachineService } from '../vm/api/machines.js';
import { runEphemeral } from '../vm/api/run.js';
import { stageIsolation, type CpuStage } from './manifest.js';
import { ensureArtifactPoint } from './vm-artifact.js';
import { runStageOnChannel } from './vm-stage-io.js';
import type { StageOutcome, StageRun, StageRunner } from './stage-runner.js';
import { STAGE_STDERR_TAIL_CHARS, VM_STAGE_MIN_BOOT_MS, VM_STAGE_STDERR_BYTES, WARM_POINT_WAIT_MS } from './limits.js';

/**
 * For a throwaway machine (clones use runStageOnChannel, which starts no helper process in the guest).
 * Runs in the guest's /bin/sh: copies stdin to $SMOL_INPUT, runs the command on it in a fresh directory
 * under the stage's limits (a subshell, so the final cat is not limited), then prints $SMOL_OUTPUT if the
 * command wrote it, else the command's stdout. The command's exit status is the wrapper's.
 */
const WRAPPER = [
  'd=$(mktemp -d /tmp/smol-stage.XXXXXX) || exit 70',
  'export SMOL_INPUT="$d/input" SMOL_OUTPUT="$d/output"',
  'cat > "$SMOL_INPUT" || exit 70',
  'cd "$d"',
  '(eval "$SMOL_LIMITS" && exec "$@") < "$SMOL_INPUT" > "$d/stdout"',
  'rc=$?',
  'if [ -f "$SMOL_OUTPUT" ]; then cat "$SMOL_OUTPUT"; else cat "$d/stdout"; fi',
  'rm -rf "$d"',
  'exit $rc',
].join('\n');

/** Shell ulimit lines for a stage's limits (the VM's own memory size bounds it too). */
export function ulimitScript(l: CpuStage['limits']): string {
  const a: string[] = [];
  if (l.cpuSeconds) a.push(`ulimit -t ${l.cpuSeconds}`);
  if (l.memoryMiB) a.push(`ulimit -v ${l.memoryMiB * 1024}`);
  if (l.openFiles) a.push(`ulimit -n ${l.openFiles}`);
  return a.join(' && ') || 'true';
}

/** Machines this runner creates are named stage-<worker pid>-<random>; a restarted worker reaps dead workers' ones. */
const NAME_RE = /^stage-(\d+)-[0-9a-f]{8}(-\d+)?$/;
const stageName = () => `stage-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;

export interface VmStageRunnerOptions {
  svc: MachineService;
  /** The throwaway machine's spec (image, memory, env) when there is no warm machine. */
  spec: Smolfile;
  /** A forkable machine: one fork point is saved from it (`<name>.warm`, unless one exists) and every attempt clones that. */
  warmMachine?: string;
  /** A saved fork point (smol snapshot ls): each attempt starts one clone from it. */
  forkPoint?: string;
  /**
   * The old way, kept as the benchmark's baseline: fork the running warm machine itself for every attempt
   * (a pause of it and a layer on its disk chain per attempt).
   */
  forkEachAttempt?: boolean;
  /** Cap on a throwaway machine's boot (restoring the snapshot, or a cold boot on the first run). */
  bootTimeoutMs?: number;
  /** Profiling (bench:rollout): each point-clone attempt's phase marks, performance.now() ms. */
  onTrace?: (marks: Record<string, number>) => void;
  /** One line each time an environment is made ready on this host (an artifact pulled, its fork point saved). */
  onNotice?: (line: string) => void;
}

/** Where a stage's clones come from: a saved point, a warm machine's point, or a registry artifact's point. */
type PointSource = { forkPoint?: string; warmMachine?: string; artifact?: string };

/** The fork point a worker saves from a warm machine: one per machine, found again by every worker and restart. */
export const warmPointName = (machine: string) => `${machine}.warm`;

export class VmStageRunner implements StageRunner {
  readonly isolation = 'vm' as const;
  /** Forks of the warm machine go one at a time: the parent's fork lock is per process, not per call. */
  private forkQueue: Promise<unknown> = Promise.resolve();

  /** Fork points by what names them (`point:P`, `warm:M`, `artifact:REF`), each resolved (saved, pulled) once. */
  private readonly points = new Map<string, Promise<string>>();
  /** Clones per point waiting with their QEMU up for the next attempts; a clone is removed after its attempt. */
  private readonly pool: ForkPointPool;

  private constructor(private readonly o: VmStageRunnerOptions) {
    this.pool = new ForkPointPool(o.svc, { name: stageName, onPrepared: (prepBegin, prepEnd) => o.onTrace?.({ prepBegin, prepEnd }) });
  }

  /**
   * Removes what dead workers left (their clones with QEMU, a save killed half-way), then checks the worker's
   * point or warm machine, saving the warm machine's point if no worker has yet.
   */
  static async create(o: VmStageRunnerOptions): Promise<VmStageRunner> {
    await o.svc.list().catch(() => []); // orphaned clones and abandoned saves, whoever made them
    await reapStageMachines(o.svc);
    const runner = new VmStageRunner(o);
    if (o.forkPoint) await runner.pointFor({ forkPoint: o.forkPoint });
    else if (o.warmMachine && o.forkEachAttempt) {
      const rec = o.svc.refresh(o.svc.store.get(o.warmMachine));
      if (rec.state !== 'running') throw new ConflictError(`warm machine "${rec.name}" is not running (state: ${rec.state})`, { hint: `Start it forkable: smol machine start ${rec.name} --forkable` });
    } else if (o.warmMachine) await runner.pointFor({ warmMachine: o.warmMachine });
    return runner;
  }

  /** The fork point an attempt of this stage clones, or null (a throwaway machine, or the per-attempt fork). */
  private pointFor(src: PointSource): Promise<string> {
    const key = src.forkPoint ? `point:${src.forkPoint}` : src.artifact ? `artifact:${src.artifact}` : `warm:${src.warmMachine}`;
    let p = this.points.get(key);
    if (!p) {
      p = src.forkPoint ? Promise.resolve(checkPoint(this.o.svc, src.forkPoint))
        : src.artifact ? ensureArtifactPoint(this.o.svc, src.artifact, { onNotice: this.o.onNotice }).then((r) => r.point)
        : ensureWarmPoint(this.o.svc, src.warmMachine!);
      this.points.set(key, p);
      p.catch(() => this.points.delete(key)); // a failure is retried by the next attempt
    }
    return p;
  }

  /** Removes the waiting clones and waits for used ones' removal; the worker calls this when it stops. */
  close(): Promise<void> {
    return this.pool.close();
  }

  private sourceOf(stage: CpuStage): PointSource | null {
    const iso = stageIsolation(stage);
    if (iso.artifact) return { artifact: iso.artifact };
    if (iso.forkPoint || iso.warmMachine) return { forkPoint: iso.forkPoint, warmMachine: iso.warmMachine };
    if (this.o.forkPoint) return { forkPoint: this.o.forkPoint };
    if (this.o.warmMachine && !this.o.forkEachAttempt) return { warmMachine: this.o.warmMachine };
    return null;
  }

  async run(r: StageRun): Promise<StageOutcome> {
    const source = this.sourceOf(r.stage);
    let point: string | null = null;
    if (source) {
      // the environment is made ready (an artifact pulled, a point saved) before the attempt's clock starts: a
      // host's first pull of a disk image is not the command's time, and the worker renews the lease meanwhile
      try {
        point = await untilAborted(this.pointFor(source), r.signal);
      } catch (err) {
        const aborted = r.signal.aborted;
        return { exitCode: null, signal: null, output: Buffer.alloc(0), stderrTail: aborted ? '' : `environment not ready: ${(err as Error).message}`, timedOut: false, aborted };
      }
    }
    const name = stageName();
    const vm = new StageVm(this.o.svc);
    const stdout = new CappedSink(r.stage.limits.maxOutputBytes, () => vm.kill());
    const stderr = new TailSink(VM_STAGE_STDERR_BYTES);
    let timedOut = false;
    let aborted = false;
    const timer = setTimeout(() => { timedOut = true; vm.kill(); }, r.timeoutMs);
    const onAbort = () => { aborted = true; vm.kill(); };
    r.signal.addEventListener('abort', onAbort, { once: true });
    if (r.signal.aborted) onAbort();
    const env = { ...r.stage.env, ...r.env, SMOL_LIMITS: ulimitScript(r.stage.limits) };
    const req: ExecRequest = { argv: ['/bin/sh', '-c', WRAPPER, 'smol-stage', ...r.stage.command], env };
    const io: ExecIo & { stdin: fs.ReadStream } = { stdin: fs.createReadStream(r.inputPath), stdout, stderr, onStart: (h) => vm.started(h) };
    const cmd = { command: r.stage.command, env, io };
    const deadline = Date.now() + r.timeoutMs;
    const perAttempt = !source && this.o.warmMachine && this.o.forkEachAttempt ? this.o.warmMachine : null;
    if (!source && !perAttempt) vm.track(name);
    try {
      const res = point
        ? await this.inPointClone(point, cmd, vm)
        : perAttempt ? await this.inClone(perAttempt, `${name}-`, cmd, vm, deadline)
        : await runEphemeral(this.o.svc, this.o.spec, req, io, {
          name, bootTimeoutMs: Math.max(VM_STAGE_MIN_BOOT_MS, Math.min(r.timeoutMs, this.o.bootTimeoutMs ?? Infinity)), signal: vm.signal,
        });
      if (stdout.overflowed) return { exitCode: null, signal: 'SIGXFSZ', output: Buffer.alloc(0), stderrTail: `output exceeds ${r.stage.limits.maxOutputBytes} bytes`, timedOut, aborted };
      return { exitCode: res.code, signal: res.signal, output: stdout.contents(), stderrTail: stderr.tail(), timedOut, aborted };
    } catch (err) {
      // a killed VM ends its exec with a channel error; only an unprovoked failure is worth reporting
      const why = timedOut || aborted || stdout.overflowed ? '' : `microVM failed: ${(err as Error).message}`;
      return { exitCode: null, signal: stdout.overflowed ? 'SIGXFSZ' : null, output: Buffer.alloc(0), stderrTail: why, timedOut, aborted };
    } finally {
      clearTimeout(timer);
      r.signal.removeEventListener('abort', onAbort);
      io.stdin.destroy();
    }
  }

  /** One clone of the point, owned by this worker (a kill -9 of it leaves the clone to the next `ls` or worker). */
  private async inPointClone(point: string, cmd: StageCommand, vm: StageVm): Promise<ExecResult> {
    const marks: Record<string, number> = { begin: performance.now() };
    if (vm.killed) throw new Error('stopped before the clone started');
    let p: PreparedClone | undefined;
    try {
      p = await this.pool.take(point);
      marks.taken = performance.now();
      vm.track(p.name);
      if (vm.killed) throw new Error('stopped before the clone started');
      // the CONFIGURE connection stays open for the command: no second connection and HELLO
      const c = await this.pool.start(p, { owned: true, keepChannel: true });
      marks.started = performance.now();
      if (c.runningMs !== undefined) marks.running = marks.taken + c.runningMs;
      if (c.readyMs !== undefined) marks.configured = marks.taken + c.readyMs;
      if (!c.ok || !c.channel) throw new ForkError(`clone from "${point}" failed: ${c.error ?? 'no clone'}`, { where: point });
      const { ch, release } = c.channel;
      try {
        if (vm.killed) throw new Error('stopped before the clone ran');
        return await runStageOnChannel(ch, cmd.command, cmd.env, cmd.io);
      } finally {
        ch.close();
        release();
      }
    } finally {
      marks.execDone = performance.now();
      if (p) {
        const pid = this.o.onTrace ? this.o.svc.store.find(p.id)?.pid : null;
        if (pid) marks.qemuCpuMs = cpuMsOf(pid) ?? NaN;
        this.pool.release(p);
      }
      this.o.onTrace?.(marks);
    }
  }

  private async inClone(warm: string, prefix: string, cmd: StageCommand, vm: StageVm, deadline: number): Promise<ExecResult> {
    const svc = this.o.svc;
    const clone = await this.forkOne(warm, prefix, deadline, vm);
    try {
      vm.track(clone);
      if (vm.killed) throw new Error('stopped before the clone ran');
      const { ch, release } = await svc.channel(clone);
      try {
        return await runStageOnChannel(ch, cmd.command, cmd.env, cmd.io);
      } finally {
        ch.close();
        release();
      }
    } finally {
      await svc.remove(clone, { force: true }).catch(() => undefined);
    }
  }

  /** One clone of the warm machine, waiting for other workers' forks of it (a ConflictError) until the deadline. */
  private forkOne(warm: string, prefix: string, deadline: number, vm: StageVm): Promise<string> {
    const attempt = async (): Promise<string> => {
      for (;;) {
        if (vm.killed) throw new Error('stopped before the fork');
        try {
          const r = await forkMachine(this.o.svc, warm, { count: 1, namePrefix: prefix });
          const c = r.clones[0];
          if (!c?.ok) throw new ForkError(`fork of "${warm}" failed: ${c?.error ?? 'no clone'}`, { where: warm });
          return c.name;
        } catch (err) {
          const busy = err instanceof ConflictError || (err instanceof ForkError && /busy/.test(err.message));
          if (!busy || Date.now() + 100 > deadline) throw err;
          await new Promise((res) => setTimeout(res, 20 + Math.random() * 80));
        }
      }
    };
    const p = this.forkQueue.then(attempt, attempt);
    this.forkQueue = p.catch(() => undefined);
    return p;
  }
}

/** p, or a rejection as soon as signal aborts (p goes on: another attempt may use what it makes ready). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error('aborted'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

interface StageCommand { command: string[]; env: Record<string, string>; io: ExecIo & { stdin: fs.ReadStream } }

/**
 * The attempt's machine, so a deadline or cancel can kill its QEMU. A throwaway machine still booting is
 * stopped through runEphemeral's signal (which keeps the boot snapshot); a clone is killed once its command
 * has started, and forkOne stops before forking once killed.
 */
class StageVm {
  private name: string | null = null;
  private running = false;
  private readonly stop = new AbortController();
  killed = false;
  constructor(private readonly svc: MachineService) {}

  /** Aborted by kill(): runEphemeral then kills the machine whatever it is doing. */
  get signal(): AbortSignal { return this.stop.signal; }

  track(name: string): void { this.name = name; }

  started(h: ExecHandle): void {
    this.running = true;
    if (this.killed) this.terminate(h);
  }

  kill(): void {
    if (this.killed) return;
    this.killed = true;
    this.stop.abort();
    if (this.running) this.terminate();
  }

  private terminate(h?: ExecHandle): void {
    h?.signal('SIGKILL');
    const rec = this.name ? this.svc.store.find(this.name) : null;
    if (rec?.pid) void this.svc.engine.terminate(rec.pid, this.svc.layout(rec), 0).catch(() => undefined);
  }
}

/** A saved point by name, refused precisely when it is missing. */
function checkPoint(svc: MachineService, name: string): string {
  if (!new ForkPointStore(svc.store.db).byName(name)) throw new NotFoundError(`no fork point named "${name}"`, { where: name, hint: 'List them with: smol snapshot ls; save one with: smol fork MACHINE --save NAME' });
  return name;
}

/**
 * The warm machine's point, saved now if no worker has: several workers starting together race for the
 * machine's fork lock and the name; the losers wait and find the winner's point.
 */
async function ensureWarmPoint(svc: MachineService, machine: string): Promise<string> {
  const name = warmPointName(machine);
  const points = new ForkPointStore(svc.store.db);
  const deadline = Date.now() + WARM_POINT_WAIT_MS;
  for (;;) {
    const fp = points.byName(name);
    const rec = svc.store.find(machine);
    if (fp) {
      if (rec && fp.machine !== rec.id) {
        throw new ConflictError(`fork point "${name}" was saved from another machine named "${machine}"`, { where: name, hint: `Remove the old point (smol snapshot rm ${name}) and start the worker again.` });
      }
      return name;
    }
    if (!rec) throw new NotFoundError(`no machine named "${machine}" and no fork point "${name}" saved from it`, { where: machine, hint: `Create and start it: smol machine create ${machine} --forkable --start` });
    const cur = svc.refresh(rec);
    if (cur.state !== 'running') throw new ConflictError(`warm machine "${machine}" is not running (state: ${cur.state}) and has no fork point yet`, { where: machine, hint: `Start it forkable: smol machine start ${machine} --forkable` });
    try {
      await saveForkPoint(svc, machine, name);
      return name;
    } catch (err) {
      if (!(err instanceof ConflictError) || Date.now() > deadline) {
        if (err instanceof ConflictError) throw new TimeoutError(`saving fork point "${name}" from "${machine}" did not get its turn within ${WARM_POINT_WAIT_MS / 1000}s: ${err.message}`, { where: machine });
        throw err;
      }
      await new Promise((res) => setTimeout(res, 100 + Math.random() * 200));
    }
  }
}

/** Removes stage machines (and their QEMU) left by workers that are gone. */
export async function reapStageMachines(svc: MachineService): Promise<number> {
  let n = 0;
  for (const rec of svc.store.list()) {
    const m = NAME_RE.exec(rec.name);
    if (!m || pidAlive(Number(m[1])) || svc.store.lockHolder(rec.id) !== null) continue;
    try {
      // a worker killed between QEMU's start and the registry update leaves a QEMU known only to its pidfile
      const layout = svc.layout(rec);
      const orphan = Number(fs.readFileSync(layout.pidFile, 'utf8').trim() || 0);
      if (orphan > 1 && orphan !== rec.pid && ownsQemu(orphan, layout.dir)) await svc.engine.terminate(orphan, layout, 0).catch(() => undefined);
    } catch {
      // no pidfile: QEMU never started
    }
    try {
      await svc.remove(rec.id, { force: true, cascade: true });
      n++;
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }
  return n;
}

/** CPU time (user + system) a process has used so far, from /proc (profiling only). */
function cpuMsOf(pid: number): number | null {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return null;
  }
}

/** Whether pid is still the QEMU of the machine whose files are in dir (a pid can be reused). */
function ownsQemu(pid: number, dir: string): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
  } catch {
    return false;
  }
}

/** Keeps stdout up to a cap; past it, calls onOverflow once (the VM is killed) and drops the rest. */
class CappedSink extends Writable {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  overflowed = false;
  constructor(private readonly cap: number, private readonly onOverflow: () => void) { super(); }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    if (!this.overflowed) {
      this.size += chunk.length;
      if (this.size > this.cap) { this.overflowed = true; this.chunks.length = 0; this.onOverflow(); } else this.chunks.push(chunk);
    }
    cb();
  }
  contents(): Buffer { return Buffer.concat(this.chunks); }
}

/** Keeps the last `cap` bytes of stderr for the failure message. */
class TailSink extends Writable {
  private buf = Buffer.alloc(0);
  constructor(private readonly cap: number) { super(); }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.buf = Buffer.concat([this.buf, chunk]);
    if (this.buf.length > this.cap) this.buf = this.buf.subarray(this.buf.length - this.cap);
    cb();
  }
  tail(): string { return this.buf.toString('utf8').trim().split('\n').slice(-5).join('\n').slice(-STAGE_STDERR_TAIL_CHARS); }
}

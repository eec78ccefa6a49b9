/**
 * A fake Engine for the machine service's unit tests: no QEMU, no guest. Each "VMM" it launches is a real
 * `sleep` process whose command line names the machine's directory and whose pid is written to the machine's
 * QEMU pidfile, so what the service reads about processes (pidAlive, strayQemuPid) is what it would read of a
 * real QEMU, and a test can kill -9 one. The guest channel runs nothing: exec answers with the exit code
 * `execCode` gives, after reading the command's stdin.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import type { Engine, ExecHandle, ExecRequest, GuestChannel, LaunchOptions, PreparedDisk, Progress } from '../../src/vm/engine.js';
import type { ForkOps, Inspection, MemoryMode } from '../../src/vm/fork/types.js';
import { runRoot, type MachineLayout } from '../../src/vm/layout.js';
import { MachineService } from '../../src/vm/service.js';
import { openMachineDb } from '../../src/vm/store/db.js';
import { MachineStore } from '../../src/vm/store/machines.js';
import type { Smolfile } from '../../src/smolfile/schema.js';
import { removeHomeShm } from './shm.js';

export interface FakeExec { dir: string; port: number; argv: string[]; env?: Record<string, string>; cwd?: string; stdin: string }
export interface FakeLaunch { dir: string; opts: LaunchOptions; pid: number }
type Configure = Parameters<GuestChannel['configure']>[0];

export class FakeEngine implements Engine {
  readonly prepared: string[] = [];
  readonly launches: FakeLaunch[] = [];
  readonly terminated: { pid: number; dir: string; graceMs: number }[] = [];
  readonly connects: { dir: string; port: number }[] = [];
  readonly configures: { dir: string; c: Configure }[] = [];
  readonly execs: FakeExec[] = [];
  readonly shutdowns: string[] = [];
  /** Set to make prepareDisk or launch fail with it. */
  failPrepare: Error | null = null;
  failLaunch: Error | null = null;
  /** The launched VMM exits at once (a guest that panics during boot). */
  vmmDies = false;
  /** No agent answers: connect fails. */
  unreachable = false;
  /** Exit code of a guest command. */
  execCode: (argv: string[]) => number = () => 0;
  /** How `fork.inspect` says a machine's RAM is held; 'shared' (a forkable parent) lets the service start a spare. */
  forkMemory: MemoryMode = 'none';
  private readonly children = new Map<number, ChildProcess>();

  async prepareDisk(spec: Smolfile, layout: MachineLayout, _p?: Progress): Promise<PreparedDisk> {
    this.prepared.push(layout.dir);
    fs.writeFileSync(layout.disk, 'fake disk'); // made before the failure, as a half-built overlay would be
    if (this.failPrepare) throw this.failPrepare;
    return { imageId: `fake:${spec.image}` };
  }

  async launch(_spec: Smolfile, layout: MachineLayout, opts: LaunchOptions): Promise<number> {
    if (this.failLaunch) throw this.failLaunch;
    const pid = this.spawnVmm(layout);
    this.launches.push({ dir: layout.dir, opts, pid });
    return pid;
  }

  /** A VMM stand-in for `layout`, with its pidfile: also what a smol killed right after launching leaves. */
  spawnVmm(layout: MachineLayout): number {
    const child = this.vmmDies
      ? spawn('true', [], { stdio: 'ignore' })
      : spawn('sleep', ['600'], { stdio: 'ignore', argv0: `fake-vmm ${layout.dir}` });
    child.unref();
    const pid = child.pid!;
    this.children.set(pid, child);
    child.once('exit', () => this.children.delete(pid));
    fs.mkdirSync(layout.dir, { recursive: true });
    fs.writeFileSync(layout.pidFile, `${pid}\n`);
    return pid;
  }

  async connect(layout: MachineLayout, port: number): Promise<GuestChannel> {
    this.connects.push({ dir: layout.dir, port });
    if (this.unreachable) throw new Error(`connect ${layout.agentSockets[port]}: ECONNREFUSED`);
    return this.channel(layout.dir, port);
  }

  async terminate(pid: number, layout: MachineLayout, graceMs: number): Promise<void> {
    this.terminated.push({ pid, dir: layout.dir, graceMs });
    await this.kill9(pid);
  }

  consoleTail(layout: MachineLayout): string {
    return `fake console of ${path.basename(layout.dir)}`;
  }

  readonly fork: ForkOps = {
    inspect: async (layout: MachineLayout): Promise<Inspection> => ({
      vm: { qemu: 'fake', accel: 'tcg', cpu: 'max', memoryMiB: 0 },
      memory: this.forkMemory, running: true, diskDevice: 'root', diskFile: layout.disk, diskSize: 1 << 30,
    }),
    identity: () => Promise.reject(new Error('fake engine: no fork identity')),
    capture: () => Promise.reject(new Error('fake engine: no fork capture')),
    resumeAbandoned: () => Promise.reject(new Error('fake engine: no fork resume')),
    restore: () => Promise.reject(new Error('fake engine: no fork restore')),
    commitLayers: () => Promise.reject(new Error('fake engine: no layer commit')),
  };

  /** SIGKILL, as `kill -9` would; resolves once the process is gone (reaped, when it is one of ours). */
  async kill9(pid: number): Promise<void> {
    const child = this.children.get(pid);
    const gone = child ? new Promise((r) => child.once('exit', r)) : Promise.resolve();
    try { process.kill(pid, 'SIGKILL'); } catch { return; }
    await gone;
  }

  /** The VMM stand-ins still running. */
  livePids(): number[] {
    return [...this.children.keys()];
  }

  async killAll(): Promise<void> {
    await Promise.all(this.livePids().map((pid) => this.kill9(pid)));
  }

  private channel(dir: string, port: number): GuestChannel {
    return {
      port,
      onStream: () => undefined,
      exec: async (req: ExecRequest): Promise<ExecHandle> => {
        const stdin = new PassThrough();
        const chunks: Buffer[] = [];
        stdin.on('data', (d: Buffer) => chunks.push(d));
        const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) => stdin.once('end', () => {
          this.execs.push({ dir, port, argv: req.argv, env: req.env, cwd: req.cwd, stdin: Buffer.concat(chunks).toString() });
          resolve({ code: this.execCode(req.argv), signal: null });
        }));
        const stdout = new PassThrough();
        const stderr = new PassThrough();
        void exit.then(() => { stdout.end(); stderr.end(); });
        return { stdout, stderr, stdin, exit, signal: () => undefined, resize: () => undefined };
      },
      putFile: () => Promise.reject(new Error('fake engine: no putFile')),
      getFile: () => Promise.reject(new Error('fake engine: no getFile')),
      configure: async (c) => { this.configures.push({ dir, c }); return { released: null }; },
      shutdown: async () => { this.shutdowns.push(dir); },
      close: () => undefined,
    };
  }
}

/** A machine service on a fresh data dir with a real SQLite store and a FakeEngine; `close` removes it all. */
export function fakeService(): { home: string; svc: MachineService; engine: FakeEngine; close: () => Promise<void> } {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-svc-'));
  const engine = new FakeEngine();
  const svc = new MachineService({ home, store: new MachineStore(openMachineDb(path.join(home, 'smol.db'))), engine });
  const close = async () => {
    await engine.killAll();
    removeHomeShm(home);
    svc.store.db.close();
    fs.rmSync(runRoot(home), { recursive: true, force: true });
    fs.rmSync(home, { recursive: true, force: true });
  };
  return { home, svc, engine, close };
}

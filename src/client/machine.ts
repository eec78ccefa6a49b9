/**
 * One machine as the SDK hands it out: its last known view (`info`, the shape of `smol machine ls --json`)
 * and the calls that act on it. `await using m = await smol.machines.create(...)` removes it at scope end.
 */
import { NotFoundError } from './errors.js';
import { exec, type ExecOptions, type ExecResult } from './exec.js';
import { Files } from './files.js';
import type { Clones, ForkOptions, SavedPoint } from './fork.js';
import type { components } from './schema.js';
import { must, type Transport } from './transport.js';

export type MachineInfo = components['schemas']['Machine'];
export type UpdateOptions = components['schemas']['UpdateMachine'];
export type StopOptions = components['schemas']['StopMachine'];

export class Machine {
  /** Files in the guest: read, write, list, and directories as tars. */
  readonly files: Files;

  constructor(private readonly t: Transport, public info: MachineInfo) {
    this.files = new Files(t, () => this.info.id);
  }

  get name(): string { return this.info.name; }
  get id(): string { return this.info.id; }
  /** As of the last answer about this machine; refresh() asks again. */
  get state(): MachineInfo['state'] { return this.info.state; }

  private get params() { return { path: { name: this.info.id } }; }

  private async set(call: Promise<MachineInfo>): Promise<this> {
    this.info = await call;
    return this;
  }

  /** Runs argv in the machine; with onStdout/onStderr the output streams to them as it comes. */
  exec(argv: string[], o: ExecOptions = {}): Promise<ExecResult> {
    return exec(this.t, this.info.id, argv, o);
  }

  refresh(): Promise<this> { return this.set(must(this.t.api.GET('/v1/machines/{name}', { params: this.params }))); }
  start(): Promise<this> { return this.set(must(this.t.api.POST('/v1/machines/{name}/start', { params: this.params }))); }
  stop(o: StopOptions = {}): Promise<this> { return this.set(must(this.t.api.POST('/v1/machines/{name}/stop', { params: this.params, body: o }))); }
  /** vCPUs stopped, memory kept; `toDisk`: RAM and devices saved to disk and QEMU ended. resume() continues. */
  pause(o: { toDisk?: boolean } = {}): Promise<this> { return this.set(must(this.t.api.POST('/v1/machines/{name}/pause', { params: this.params, body: o }))); }
  resume(): Promise<this> { return this.set(must(this.t.api.POST('/v1/machines/{name}/resume', { params: this.params }))); }
  /** cpus and memory of a stopped machine; labels of any (`{ set: {K: V}, remove: [K] }`). */
  update(o: UpdateOptions): Promise<this> { return this.set(must(this.t.api.PATCH('/v1/machines/{name}', { params: this.params, body: o }))); }

  /** Clones this running forkable machine (`count`, default 1); the clones continue from this moment. */
  async fork(o: ForkOptions = {}): Promise<Clones> {
    return Machine.clones(this.t, await must(this.t.api.POST('/v1/machines/{name}/fork', { params: this.params, body: o })));
  }
  /** Saves this running forkable machine as a named fork point (smol.points.fork clones from it). */
  savePoint(point: string): Promise<SavedPoint> {
    return must(this.t.api.POST('/v1/machines/{name}/points', { params: this.params, body: { name: point } }));
  }

  /** A fork's answer as Machines, with its failures alongside. */
  static clones(t: Transport, r: components['schemas']['ForkResult']): Clones {
    return Object.assign(r.clones.map((c) => new Machine(t, c)), { failed: r.failed, totalMs: r.totalMs });
  }

  /** Removes the machine, a running one too unless `force: false`; answers the names removed. */
  async remove(o: { force?: boolean } = {}): Promise<string[]> {
    const r = await must(this.t.api.DELETE('/v1/machines/{name}', { params: { ...this.params, query: { force: o.force === false ? 'false' : 'true' } } }));
    return r.removed;
  }

  /** `await using`: the machine is removed when the scope ends (already gone is fine). */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.remove();
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  toJSON(): MachineInfo { return this.info; }
}

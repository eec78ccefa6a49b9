/**
 * The client: `new Smol()` talks to `smol serve` on `$SMOL_HOME/smol.sock`; `new Smol({ url, token, ca })` to a
 * TCP or HTTPS one. `smol.machines` makes, lists and finds machines; each comes back as a Machine to act on.
 */
import type { ExecOptions, ExecResult } from './exec.js';
import { Points } from './fork.js';
import { Machine, type MachineInfo } from './machine.js';
import type { components } from './schema.js';
import { must, openTransport, type SmolOptions, type Transport } from './transport.js';

export type CreateOptions = components['schemas']['CreateMachine'];
export type MachineState = MachineInfo['state'];
export type Health = components['schemas']['Health'];

export interface ListOptions {
  /** Only machines with all of these labels (`{ team: 'a' }`). */
  labels?: Record<string, string>;
  state?: MachineState;
}

/** A throwaway machine's options (image, memory, cpus, smolfile, ...) and its command's (env, workdir, timeoutMs, callbacks). */
export type RunOptions = Omit<CreateOptions, 'name' | 'start' | 'labels' | 'env' | 'workdir'> & ExecOptions & { argv: string[] };

export class Machines {
  constructor(private readonly t: Transport) {}

  /** Makes a machine (the options of `smol machine create`, or `smolfile`), started unless `start: false`. */
  async create(o: CreateOptions = {}): Promise<Machine> {
    return new Machine(this.t, await must(this.t.api.POST('/v1/machines', { body: { ...o, start: o.start ?? true } })));
  }

  async list(o: ListOptions = {}): Promise<Machine[]> {
    const label = Object.entries(o.labels ?? {}).map(([k, v]) => `${k}=${v}`);
    const r = await must(this.t.api.GET('/v1/machines', { params: { query: { ...(label.length ? { label } : {}), ...(o.state ? { state: o.state } : {}) } } }));
    return r.machines.map((m) => new Machine(this.t, m));
  }

  /** By name or id; NotFoundError when there is none. */
  async get(name: string): Promise<Machine> {
    return new Machine(this.t, await must(this.t.api.GET('/v1/machines/{name}', { params: { path: { name } } })));
  }
}

export class Smol {
  readonly machines: Machines;
  readonly points: Points;
  private readonly t: Transport;

  constructor(o: SmolOptions = {}) {
    this.t = openTransport(o);
    this.machines = new Machines(this.t);
    this.points = new Points(this.t);
  }

  /** The socket path or URL this client talks to. */
  get where(): string { return this.t.where; }

  /**
   * Runs one command in a throwaway machine, removed afterwards whatever happened. Buffered, it is one call to
   * POST /v1/run (as `smol run`: a boot snapshot when one fits); with onStdout/onStderr, or options a run does
   * not take (ports, volumes, ...), it is create, a streamed exec and remove.
   */
  async run(o: RunOptions): Promise<ExecResult> {
    const { argv, env, workdir, stdin, timeoutMs, maxOutputBytes, onStdout, onStderr, signal, ...create } = o;
    const { image, smolfile, cpus, memory, net, ...rest } = create;
    if (!onStdout && !onStderr && Object.values(rest).every((v) => v === undefined)) {
      const input = stdin === undefined ? undefined : Buffer.from(typeof stdin === 'string' ? Buffer.from(stdin, 'utf8') : stdin).toString('base64');
      return must(this.t.api.POST('/v1/run', { body: { image, smolfile, cpus, memory, net, argv, env, workdir, stdin: input, timeoutMs, maxOutputBytes }, signal }));
    }
    await using m = await this.machines.create({ ...create, labels: { 'smol.sdk/run': 'true' } });
    // awaited here: a bare `return` would leave the scope, and remove the machine, while the exec still runs
    return await m.exec(argv, { env, workdir, stdin, timeoutMs, maxOutputBytes, onStdout, onStderr, signal });
  }

  health(): Promise<Health> { return must(this.t.api.GET('/v1/health')); }

  /** Closes the connections this client holds (the process can then exit at once). */
  close(): Promise<void> { return this.t.close(); }
  [Symbol.asyncDispose](): Promise<void> { return this.close(); }
}

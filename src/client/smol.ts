/**
 * The client: `new Smol()` talks to `smol serve` on `$SMOL_HOME/smol.sock`; `new Smol({ url, token, ca })` to a
 * TCP or HTTPS one. `smol.machines` makes, lists and finds machines; each comes back as a Machine to act on.
 */
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
  private readonly t: Transport;

  constructor(o: SmolOptions = {}) {
    this.t = openTransport(o);
    this.machines = new Machines(this.t);
  }

  /** The socket path or URL this client talks to. */
  get where(): string { return this.t.where; }

  health(): Promise<Health> { return must(this.t.api.GET('/v1/health')); }

  /** Closes the connections this client holds (the process can then exit at once). */
  close(): Promise<void> { return this.t.close(); }
  [Symbol.asyncDispose](): Promise<void> { return this.close(); }
}

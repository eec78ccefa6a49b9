/**
 * Forks: a running forkable machine cloned into machines that continue from that moment, and named fork points
 * (one pause saves the point; clones start from it later). A partial fork answers the clones that run and, in
 * `failed`, those that did not: they exist or not independently, so nothing is thrown away by an exception.
 */
import { Machine } from './machine.js';
import type { components } from './schema.js';
import { must, type Transport } from './transport.js';

export type ForkOptions = components['schemas']['Fork'];
export type PointForkOptions = components['schemas']['PointFork'];
export type ForkPoint = components['schemas']['ForkPoint'];
export type SavedPoint = components['schemas']['SavedPoint'];

/** The clones that run, with the ones that failed (`[]` when all ran) and the fork's time. */
export type Clones = Machine[] & { failed: components['schemas']['ForkResult']['failed']; totalMs: number };

/** `smol.points`: the saved fork points (`smol snapshot`). */
export class Points {
  constructor(private readonly t: Transport) {}

  async list(): Promise<ForkPoint[]> {
    return (await must(this.t.api.GET('/v1/points'))).points;
  }

  /** Clones from a saved point: `count`, or exact `names`. */
  fork(point: string, o: PointForkOptions = {}): Promise<Clones> {
    return must(this.t.api.POST('/v1/points/{point}/fork', { params: { path: { point } }, body: o })).then((r) => Machine.clones(this.t, r));
  }

  /** `force`: drop the name even while clones still use the point's files. */
  async remove(point: string, o: { force?: boolean } = {}): Promise<void> {
    await must(this.t.api.DELETE('/v1/points/{point}', { params: { path: { point }, query: o.force ? { force: 'true' } : {} } }));
  }
}

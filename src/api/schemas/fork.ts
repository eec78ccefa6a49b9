/** Fork and fork points: the bodies of a fork, a save and a point fork, and their answers. */
import { z } from 'zod';
import { envSchema } from '../../smolfile/schema.js';
import { machineSchema } from './machines.js';
import { request, response } from './registry.js';

const count = z.int().min(1).max(64, 'at most 64 clones per fork');
const name = z.string().min(1).max(128).regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/, 'letters, digits, _ . - (not first)');

export const forkSchema = request('Fork', z.strictObject({
  count: count.optional().describe('default 1'),
  namePrefix: name.optional().describe('clones are PREFIX1, PREFIX2, … (default NAME-)'),
  env: envSchema.optional().describe('per clone; {index}, {name} and {count} expand'),
  labels: z.record(z.string(), z.string()).optional(),
  waitReady: z.boolean().optional().describe('wait until the workload runs smol-fork-ready'),
  hold: z.boolean().optional().describe('leave the parent paused after the fork'),
}));

export const pointForkSchema = request('PointFork', z.strictObject({
  count: count.optional().describe('default 1, or the number of names'),
  names: z.array(name).min(1).max(64).optional().describe('exact clone names, instead of PREFIX1…'),
  namePrefix: name.optional(),
  env: envSchema.optional(),
  labels: z.record(z.string(), z.string()).optional(),
}).refine((o) => !(o.names && o.count !== undefined && o.count !== o.names.length), { message: 'count must equal the number of names', path: ['count'] }));

export const savePointSchema = request('SavePoint', z.strictObject({ name: name.describe('the fork point\'s name') }));

export const forkFailureSchema = z.object({ name: z.string(), error: z.string() });

export const forkResultSchema = response('ForkResult', z.object({
  clones: z.array(machineSchema).describe('the clones that run'),
  failed: z.array(forkFailureSchema).describe('clones that did not start (the others run)'),
  totalMs: z.number(),
}));

export const pointSchema = response('ForkPoint', z.object({
  name: z.string(), id: z.string(), machine: z.string(), machineGone: z.boolean(), createdAt: z.string(), memoryMiB: z.int(),
  clones: z.array(z.string()),
  sizes: z.object({ templateBytes: z.number(), stateBytes: z.number(), diskBytes: z.number(), totalBytes: z.number() }),
}).loose(), 'a saved fork point, as `smol snapshot ls --json` prints it');

export const pointListSchema = response('ForkPointList', z.object({ points: z.array(pointSchema) }));

export const savedPointSchema = response('SavedPoint', z.object({
  point: z.string(), id: z.string(), machine: z.string(), pausedMs: z.number(), stateBytes: z.number(), chainDepth: z.int(), totalMs: z.number(),
}).loose());

export const pointRemovedSchema = response('PointRemoved', z.object({ point: z.string(), freed: z.boolean(), clones: z.array(z.string()) }));

export const pointParamsSchema = z.strictObject({ point: name });
export const pointRemoveQuerySchema = z.strictObject({ force: z.enum(['true', 'false', '1', '0']).optional().describe('drop the name while clones use it') });

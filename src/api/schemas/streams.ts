/** Logs and lifecycle events: queries and the JSON of their SSE events. */
import { z } from 'zod';
import { machineStateSchema } from './machines.js';
import { response } from './registry.js';

const flag = z.enum(['1', '0', 'true', 'false']).transform((v) => v === '1' || v === 'true');

export const logsQuerySchema = z.strictObject({
  follow: flag.optional().describe('1: SSE `line` events, new lines as they come, until the machine stops'),
  tail: z.coerce.number().int().min(0).max(1_000_000).optional().describe('only the last N lines'),
});

export const logLineSchema = response('LogLine', z.object({ line: z.string() }), 'data of a `line` event');

export const machineEventSchema = response('MachineEvent', z.object({
  name: z.string(), id: z.string(),
  state: z.union([machineStateSchema, z.literal('removed')]),
  previous: z.union([machineStateSchema, z.literal('removed')]).nullable().describe('null: a machine made since the stream began'),
  at: z.string(),
}), 'data of a `machine` event');

/** Machines: the Machine shape (machine-view.ts, `smol machine ls --json`) and the bodies that change one. */
import { z } from 'zod';
import { response } from './registry.js';

const nullable = <T extends z.ZodType>(s: T) => s.nullable();

export const machineStateSchema = z.enum(['creating', 'stopped', 'starting', 'running', 'stopping', 'crashed', 'paused']);

export const machineSchema = response('Machine', z.object({
  name: z.string(), id: z.string(), state: machineStateSchema, ephemeral: z.boolean(), image: z.string(), imageId: nullable(z.string()),
  cpus: z.int(), memoryMiB: z.int(), net: z.boolean(),
  ports: z.array(z.object({ address: z.string(), host: z.int(), guest: z.int(), protocol: z.enum(['tcp', 'udp']) })),
  allow: z.array(z.string()), gpu: z.boolean(), forkable: z.boolean(),
  pid: nullable(z.int()), parent: nullable(z.string()), generation: z.int(), forkPoint: nullable(z.string()),
  createdAt: z.string(), startedAt: nullable(z.string()), lastError: nullable(z.string()), dir: z.string(), consoleLog: z.string(),
  volumes: z.array(z.object({ host: z.string(), guest: z.string(), readonly: z.boolean(), unsafe: z.boolean().optional() })),
  detached: nullable(z.object({
    command: z.array(z.string()), rm: z.boolean(), supervisorPid: nullable(z.int()), state: z.enum(['booting', 'running', 'exited']),
    exitCode: nullable(z.int()), error: nullable(z.string()), startedAt: z.string(), endedAt: nullable(z.string()),
  }).loose()),
  labels: z.record(z.string(), z.string()),
  secrets: z.object({ env: z.array(z.string()), files: z.array(z.string()) }),
  chainDepth: nullable(z.int()),
  usage: z.object({
    memory: nullable(z.object({ rssMiB: z.number(), pssMiB: z.number(), privateMiB: z.number(), sharedMiB: z.number() })),
    disk: nullable(z.object({ privateBytes: z.number(), sharedBytes: z.number(), chain: z.array(z.string()) })),
  }),
}), 'A machine, as `smol machine ls --json` prints it');

export const machineListSchema = response('MachineList', z.object({ machines: z.array(machineSchema) }));

/** `?label=K=V` (repeatable, all must match) and `?state=running`. */
export const machineListQuerySchema = z.strictObject({
  label: z.array(z.string().regex(/^[^=]+(=.*)?$/, 'use K or K=V')).optional().describe('K=V or K; repeatable, all must match'),
  state: machineStateSchema.optional(),
});

export const machineNameParamsSchema = z.strictObject({ name: z.string().min(1).max(128) });

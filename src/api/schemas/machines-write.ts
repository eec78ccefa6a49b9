/** Bodies that create or change machines; their paths in errors are the body's field paths (`ports.0`). */
import { z } from 'zod';
import { cpusSchema, envSchema, memorySchema } from '../../smolfile/schema.js';
import { labelsSchema } from '../../smolfile/labels.js';
import { portsSchema } from '../../smolfile/network.js';
import { request, response } from './registry.js';

const guestPath = z.string().startsWith('/', 'must be an absolute guest path');

export const createMachineSchema = request('CreateMachine', z.strictObject({
  name: z.string().min(1).max(63).optional().describe('default: a generated name'),
  smolfile: z.union([z.string().max(256 * 1024), z.record(z.string(), z.unknown())]).optional().describe('a Smolfile as an object or as YAML text; relative paths in it are relative to the server\'s working directory'),
  image: z.string().min(1).optional(),
  from: z.string().min(1).optional().describe('a .smolmachine artifact on the server\'s host: its recorded vCPUs, memory, workdir and env are the defaults, and one packed with memory resumes at its first start'),
  cpus: cpusSchema.optional(),
  memory: memorySchema.optional().describe('MiB as a number, or "512M", "1G"'),
  workdir: guestPath.optional(),
  env: envSchema.optional(),
  ports: portsSchema.optional().describe('"8080:80" or {host, guest, address?, protocol?}'),
  volumes: z.array(z.string()).optional().describe('"HOST:GUEST[:ro]"'),
  net: z.boolean().optional(),
  forkable: z.boolean().optional().describe('keep guest memory in a file so the machine can be forked (machine create --forkable)'),
  labels: labelsSchema.optional(),
  start: z.boolean().optional().describe('start it before answering'),
}));

export const updateMachineSchema = request('UpdateMachine', z.strictObject({
  cpus: cpusSchema.optional(),
  memory: memorySchema.optional(),
  labels: z.strictObject({ set: labelsSchema.optional(), remove: z.array(z.string()).optional() }).optional(),
}));

export const stopMachineSchema = request('StopMachine', z.strictObject({
  force: z.boolean().optional().describe('kill QEMU at once instead of a guest shutdown'),
  timeoutMs: z.int().min(1).max(600_000).optional(),
}));

export const pauseMachineSchema = request('PauseMachine', z.strictObject({
  toDisk: z.boolean().optional().describe('save RAM and device state to disk and end QEMU'),
}));

export const removeQuerySchema = z.strictObject({ force: z.enum(['true', 'false', '1', '0']).optional().describe('remove a running machine too') });

export const removedSchema = response('Removed', z.object({ removed: z.array(z.string()) }));

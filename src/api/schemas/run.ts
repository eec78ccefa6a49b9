/** `POST /v1/run`: one command in a throwaway machine, as `smol run` runs it. */
import { z } from 'zod';
import { cpusSchema, memorySchema } from '../../smolfile/schema.js';
import { execSchema } from './exec.js';
import { request } from './registry.js';

export const runSchema = request('Run', execSchema.extend({
  image: z.string().min(1).optional().describe('default: smol\'s default image'),
  smolfile: z.union([z.string().max(256 * 1024), z.record(z.string(), z.unknown())]).optional().describe('a Smolfile as an object or as YAML text'),
  cpus: cpusSchema.optional(),
  memory: memorySchema.optional().describe('MiB as a number, or "512M", "1G"'),
  net: z.boolean().optional(),
}));

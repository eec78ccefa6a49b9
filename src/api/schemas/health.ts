import { z } from 'zod';
import { response } from './registry.js';

export const healthSchema = response('Health', z.object({ ok: z.literal(true), version: z.string() }));
export const readySchema = response('Ready', z.object({ ok: z.literal(true), machineDb: z.string() }));

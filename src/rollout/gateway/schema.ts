/** The gateway's versioned request body (v1). Unknown fields are rejected so typos do not pass silently. */
import { z } from 'zod';

export const inferRequestSchema = z.strictObject({
  apiVersion: z.literal('v1'),
  requestId: z.string().min(1).max(200),
  rolloutId: z.string().min(1).max(200),
  idempotencyKey: z.string().min(1).max(500),
  model: z.strictObject({ name: z.string().min(1), version: z.string().min(1) }),
  promptVersion: z.string().min(1),
  input: z.strictObject({ ref: z.string().regex(/^sha256:[0-9a-f]{64}$/).optional(), text: z.string() }),
  params: z.record(z.string(), z.unknown()).default({}),
  deadline: z.number().int().positive(),
});
export type InferRequestBody = z.output<typeof inferRequestSchema>;

/** Canonical JSON (sorted keys) so equal parameters batch together and hash equally. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

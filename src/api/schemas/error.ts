/** The one error shape of every non-2xx answer (docs/api.md, Errors). */
import { z } from 'zod';
import { response } from './registry.js';

export const issueSchema = z.object({ path: z.string(), message: z.string() });

export const errorSchema = response('Error', z.object({
  error: z.object({
    code: z.string().describe('snake_case error class: invalid_input, not_found, conflict, unauthorized, ...'),
    message: z.string(),
    hint: z.string().optional(),
    where: z.string().optional(),
    exitCode: z.int().describe('the exit code the CLI gives for the same failure (docs/exit-codes.md)'),
    issues: z.array(issueSchema).optional(),
  }),
}), 'What failed, where, and how to fix it');

export type ErrorBody = z.infer<typeof errorSchema>;

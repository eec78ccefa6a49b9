/** Exec: one command in a running machine, buffered (ExecResult) or streamed as server-sent events. */
import { z } from 'zod';
import { envSchema } from '../../smolfile/schema.js';
import { request, response } from './registry.js';

/** Per stream, by default; the most a buffered exec holds in memory is twice the cap. */
export const EXEC_OUTPUT_DEFAULT_BYTES = 16 * 1024 * 1024;
export const EXEC_OUTPUT_MAX_BYTES = 64 * 1024 * 1024;
/** Base64 of 768 KiB fits the 1 MiB JSON body cap. */
const STDIN_MAX_CHARS = 1024 * 1024;

export const execSchema = request('Exec', z.strictObject({
  argv: z.array(z.string().refine((s) => !s.includes('\0'), 'cannot contain NUL bytes')).min(1, 'give the command to run'),
  env: envSchema.optional(),
  workdir: z.string().startsWith('/', 'must be an absolute guest path').optional().describe('default: the machine\'s workdir'),
  stdin: z.base64().max(STDIN_MAX_CHARS).optional().describe('bytes for the command\'s stdin, base64'),
  timeoutMs: z.int().min(1).max(24 * 3600_000).optional(),
  maxOutputBytes: z.int().min(0).max(EXEC_OUTPUT_MAX_BYTES).optional().describe(`per stream; default ${EXEC_OUTPUT_DEFAULT_BYTES}; the rest is dropped and *Truncated set`),
  encoding: z.enum(['utf8', 'base64']).optional().describe('of stdout and stderr in the answer; default utf8'),
}));

export const execResultSchema = response('ExecResult', z.object({
  exitCode: z.int().describe('the shell convention: 128+N for signal N, 124 for a timeout'),
  signal: z.string().nullable(),
  timedOut: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  stdoutTruncated: z.boolean(),
  stderrTruncated: z.boolean(),
  durationMs: z.number(),
}));

export const execExitEventSchema = response('ExecExitEvent', z.object({ exitCode: z.int(), signal: z.string().nullable(), timedOut: z.boolean() }));
export const execDataEventSchema = response('ExecDataEvent', z.object({ data: z.string().describe('base64 bytes') }));

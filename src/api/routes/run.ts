/**
 * `POST /v1/run`: a throwaway machine for one command, as `smol run` makes it (a boot snapshot when one fits),
 * removed when the command ends, when it fails, or when the client goes away.
 */
import { Readable } from 'node:stream';
import { parseSmolfile } from '../../smolfile/load.js';
import { mergeSpec } from '../../smolfile/merge.js';
import { exitCodeOf } from '../../vm/api/exec.js';
import { runEphemeral } from '../../vm/api/run.js';
import { hostPaths } from '../context.js';
import { hostPathRefused } from '../host-paths.js';
import { CappedBuffer } from '../exec-sinks.js';
import { outputStrings } from './exec.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { EXEC_OUTPUT_DEFAULT_BYTES, execResultSchema, type execSchema } from '../schemas/exec.js';
import { runSchema } from '../schemas/run.js';
import type { z } from 'zod';
import type { ApiContext } from '../context.js';
import type { Smolfile } from '../../smolfile/schema.js';

export const routes: Route[] = [
  defineRoute({
    method: 'POST', path: '/v1/run', operationId: 'run', tags: ['exec'], body: runSchema,
    summary: 'Run one command in a throwaway machine and answer with its exit code and output (each stream capped)',
    responses: { 200: { description: 'the command ran (whatever its exit code)', schema: execResultSchema }, 400: { description: 'invalid options', schema: errorSchema }, ...hostPathRefused, 413: { description: 'utf8 output too long as JSON: ask for base64', schema: errorSchema } },
    handle: async ({ ctx, body, signal }) => {
      const base = body.smolfile === undefined ? undefined : parseSmolfile(typeof body.smolfile === 'string' ? body.smolfile : JSON.stringify(body.smolfile), 'body.smolfile');
      const spec = mergeSpec(base, undefined, { image: body.image, cpus: body.cpus, memory: body.memory, net: body.net, env: body.env, workdir: body.workdir });
      hostPaths(ctx).checkSpec(spec, body.smolfile === undefined ? 'body' : 'smolfile');
      return { body: await runBuffered(ctx, spec, body, signal) };
    },
  }),
];

/** One command in a throwaway machine of `spec`, its output held up to the caps: `/v1/run` and `/v1/pack/run`. */
export async function runBuffered(ctx: ApiContext, spec: Smolfile, body: Omit<z.output<typeof execSchema>, 'argv'> & { argv: string[] }, signal: AbortSignal): Promise<z.output<typeof execResultSchema>> {
  const cap = body.maxOutputBytes ?? EXEC_OUTPUT_DEFAULT_BYTES;
  const stdout = new CappedBuffer(cap);
  const stderr = new CappedBuffer(cap);
  const stdin = body.stdin !== undefined ? Readable.from([Buffer.from(body.stdin, 'base64')]) : null;
  const t0 = performance.now();
  ctx.metrics.boots.inc();
  // the client leaving aborts the run: its machine is killed and removed, as Ctrl-C does to `smol run`
  const res = await ctx.metrics.time(ctx.metrics.execSeconds, () =>
    runEphemeral(ctx.svc, spec, { argv: body.argv, env: body.env, cwd: body.workdir }, { stdout, stderr, stdin, signal, timeoutMs: body.timeoutMs }, { signal }));
  const enc = body.encoding === 'base64' ? 'base64' : 'utf8';
  return { exitCode: exitCodeOf(res), signal: res.signal, timedOut: res.timedOut, ...outputStrings(stdout.bytes(), stderr.bytes(), enc), stdoutTruncated: stdout.truncated, stderrTruncated: stderr.truncated, durationMs: Math.round(performance.now() - t0) };
}

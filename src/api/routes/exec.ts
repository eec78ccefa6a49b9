/** Exec in a running machine: buffered (one JSON answer) or streamed as server-sent events. */
import { Readable } from 'node:stream';
import type { z } from 'zod';
import { ConflictError } from '../../errors/index.js';
import { execInMachine, exitCodeOf, type ExecIo, type ExecResult } from '../../vm/api/exec.js';
import { CappedBuffer, SseSink, sseEvent } from '../exec-sinks.js';
import { ApiError, httpError } from '../errors.js';
import { defineRoute, type Request, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { EXEC_OUTPUT_DEFAULT_BYTES, execResultSchema, execSchema } from '../schemas/exec.js';
import { machineNameParamsSchema } from '../schemas/machines.js';

type ExecBody = z.output<typeof execSchema>;
type ExecRequest = Request<{ name: string }, Record<string, never>, ExecBody>;

/**
 * Characters both streams may take in the JSON answer: V8 strings end near 2^29, and JSON.stringify of a
 * guest's control bytes costs 6 each (\u0001), so 2 × 64 MiB of them would fail as a 500 after ~1 GiB.
 * Plain text at the largest cap (2 × 64 MiB) stays well under.
 */
export const MAX_JSON_OUTPUT_CHARS = 2 ** 28;

/** An upper bound on a utf8 buffer's JSON-escaped length (a multi-byte character counts its bytes). */
export function jsonEscapedLength(b: Buffer): number {
  let n = b.length;
  for (const c of b) {
    if (c === 0x22 || c === 0x5c || c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d) n += 1;
    else if (c < 0x20) n += 5;
  }
  return n;
}

/** Both streams as the answer's strings; utf8 whose JSON would be too long is refused, pointing at base64. */
export function outputStrings(stdout: Buffer, stderr: Buffer, enc: 'utf8' | 'base64'): { stdout: string; stderr: string } {
  if (enc === 'utf8') {
    const chars = jsonEscapedLength(stdout) + jsonEscapedLength(stderr);
    if (chars > MAX_JSON_OUTPUT_CHARS) {
      throw new ApiError(413, 'payload_too_large', `the command's output escaped as utf8 JSON is ${chars} characters, over ${MAX_JSON_OUTPUT_CHARS}`, {
        hint: 'Ask for "encoding": "base64" (4/3 of the bytes), a smaller maxOutputBytes, or stream it: POST /v1/machines/{name}/exec/stream.',
      }, 65);
    }
  }
  return { stdout: stdout.toString(enc), stderr: stderr.toString(enc) };
}

const exitOf = (r: ExecResult) => ({ exitCode: exitCodeOf(r), signal: r.signal, timedOut: r.timedOut });

/** As `smol machine exec` runs it: the machine's env and workdir under the request's. */
function runExec(r: ExecRequest, io: Omit<ExecIo, 'stdin' | 'signal' | 'timeoutMs'>): Promise<ExecResult> {
  const { body, ctx, params, signal } = r;
  const stdin = body.stdin !== undefined ? Readable.from([Buffer.from(body.stdin, 'base64')]) : null;
  return ctx.metrics.time(ctx.metrics.execSeconds, () =>
    execInMachine(ctx.svc, params.name, { argv: body.argv, env: body.env, cwd: body.workdir }, { ...io, stdin, signal, timeoutMs: body.timeoutMs }));
}

const common = { params: machineNameParamsSchema, body: execSchema, tags: ['exec'] };
const failures = { 404: { description: 'no such machine', schema: errorSchema }, 409: { description: 'the machine is not running', schema: errorSchema } };

export const routes: Route[] = [
  defineRoute({
    ...common, method: 'POST', path: '/v1/machines/{name}/exec', operationId: 'exec',
    summary: 'Run a command and answer with its exit code and output (each stream capped)',
    responses: { 200: { description: 'the command ran (whatever its exit code)', schema: execResultSchema }, ...failures, 413: { description: 'utf8 output too long as JSON: ask for base64 or stream it', schema: errorSchema } },
    handle: async (r) => {
      const cap = r.body.maxOutputBytes ?? EXEC_OUTPUT_DEFAULT_BYTES;
      const stdout = new CappedBuffer(cap);
      const stderr = new CappedBuffer(cap);
      const t0 = performance.now();
      const res = await runExec(r, { stdout, stderr });
      const enc = r.body.encoding === 'base64' ? 'base64' : 'utf8';
      return { body: { ...exitOf(res), ...outputStrings(stdout.bytes(), stderr.bytes(), enc), stdoutTruncated: stdout.truncated, stderrTruncated: stderr.truncated, durationMs: Math.round(performance.now() - t0) } };
    },
  }),
  defineRoute({
    ...common, method: 'POST', path: '/v1/machines/{name}/exec/stream', operationId: 'execStream',
    summary: 'Run a command, its output as server-sent events: stdout, stderr ({data: base64}), then exit or error',
    responses: { 200: { description: 'events: stdout, stderr (ExecDataEvent), exit (ExecExitEvent), error (Error)', contentType: 'text/event-stream' }, ...failures },
    handle: async (r) => {
      // a machine that is missing or stopped is a plain error answer, before the stream starts
      const rec = r.ctx.svc.refresh(r.ctx.svc.store.get(r.params.name));
      if (rec.state !== 'running') throw new ConflictError(`machine "${rec.name}" is not running (state: ${rec.state})`, { where: rec.name, hint: `Start it first: smol machine start ${rec.name}` });
      r.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
      r.res.flushHeaders();
      try {
        const res = await runExec(r, { stdout: new SseSink(r.res, 'stdout'), stderr: new SseSink(r.res, 'stderr') });
        r.res.end(sseEvent('exit', exitOf(res)));
      } catch (err) {
        if (r.signal.aborted) return; // the client left; the command was killed with it
        r.res.end(sseEvent('error', httpError(err).body));
      }
    },
  }),
];

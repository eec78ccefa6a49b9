/**
 * A machine's console log, as `smol machine logs` reads it (pumpConsoleLog: the rotated generation first, a
 * chunk at a time): plain text, or with follow=1 one SSE `line` event per line until the machine stops.
 */
import { ConflictError } from '../../errors/index.js';
import { pumpConsoleLog } from '../../vm/api/machines.js';
import { openSse } from '../sse.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { machineNameParamsSchema } from '../schemas/machines.js';
import { logsQuerySchema } from '../schemas/streams.js';

const POLL_MS = 200;
/** A guest can write a line with no newline forever: past this it goes out as a line of its own. */
const LINE_MAX = 64 * 1024;

/** Splits chunks into lines; holds at most LINE_MAX of an unfinished one. */
function lineSplitter(emit: (line: string) => void): { write: (b: Buffer) => void; flush: () => void } {
  let rest = Buffer.alloc(0);
  return {
    write: (b) => {
      let buf = Buffer.concat([rest, b]);
      for (let nl = buf.indexOf(0x0a); nl >= 0; nl = buf.indexOf(0x0a)) {
        emit(buf.subarray(0, nl).toString('utf8').replace(/\r$/, ''));
        buf = buf.subarray(nl + 1);
      }
      while (buf.length > LINE_MAX) { emit(buf.subarray(0, LINE_MAX).toString('utf8')); buf = buf.subarray(LINE_MAX); }
      rest = Buffer.from(buf);
    },
    flush: () => { if (rest.length) emit(rest.toString('utf8')); rest = Buffer.alloc(0); },
  };
}

export const routes: Route[] = [
  defineRoute({
    method: 'GET', path: '/v1/machines/{name}/logs', operationId: 'machineLogs', tags: ['machines'],
    summary: 'The guest console log: text/plain, or with follow=1 SSE `line` events ({line}) until the machine stops',
    params: machineNameParamsSchema, query: logsQuerySchema,
    responses: {
      200: { description: 'text/plain; with follow=1, text/event-stream of `line` events (LogLine)', contentType: 'text/plain' },
      404: { description: 'no such machine', schema: errorSchema },
    },
    handle: async ({ ctx, params, query, res }) => {
      const svc = ctx.svc;
      const rec = svc.store.get(params.name);
      const file = svc.layout(rec).consoleLog;
      if (!query.follow) {
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
        // chunks of at most 1 MiB; the log itself is bounded by its rotation
        pumpConsoleLog(file, query.tail, (b) => res.write(b)).close();
        res.end();
        return;
      }
      if (query.tail === undefined && svc.refresh(rec).state !== 'running') {
        throw new ConflictError(`machine "${rec.name}" is not running: there is nothing to follow`, { where: rec.name, hint: 'Leave out follow to read the log as it is.' });
      }
      let stop = () => undefined as void;
      const sse = openSse(res, () => stop());
      const lines = lineSplitter((line) => sse.send('line', { line }));
      const log = pumpConsoleLog(file, query.tail, lines.write);
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          const cur = svc.store.find(rec.id);
          const done = !cur || svc.refresh(cur).state !== 'running';
          log.drain(lines.write);
          if (done || sse.closed) stop();
        }, POLL_MS);
        stop = () => { clearInterval(timer); resolve(); };
      });
      log.close();
      lines.flush();
      sse.end();
    },
  }),
];

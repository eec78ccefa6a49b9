/**
 * Interactive exec over a WebSocket (the `ws` library on the server's own upgrade hook; auth ran before it).
 * Client → server: binary frames are stdin; text frames are JSON resize, signal or eof. Server → client:
 * binary frames with a 1-byte stream prefix (1 stdout, 2 stderr), a final `exit` text frame, close 1000.
 * A client that goes away kills the guest command: nothing is left running for nobody.
 */
import { PassThrough, Writable } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { z } from 'zod';
import { ConflictError, UserError } from '../../errors/index.js';
import { execInMachine, exitCodeOf, type ExecHandle } from '../../vm/api/exec.js';
import { ApiError, httpError } from '../errors.js';
import { defineRoute, type Route } from '../router.js';
import { errorSchema } from '../schemas/error.js';
import { machineNameParamsSchema } from '../schemas/machines.js';
import { wsControlSchema, wsExecQuerySchema } from '../schemas/ws-exec.js';

/** One client frame at most; stdin arrives in many. */
const MAX_FRAME = 1024 * 1024;
/**
 * Stdin the command has not read yet, held for it. Past it the session ends with an error: pausing the socket
 * instead would also stop reading the client's pongs and close, so a client gone meanwhile would go unseen.
 */
const STDIN_UNREAD_MAX = 8 * 1024 * 1024;
/** Output waits for the socket past this much unsent, so a slow client slows the guest, not our memory. */
const SEND_HIGH_WATER = 1024 * 1024;
/**
 * SMOL_API_WS_PING_MS (default 30 s): a client that has not answered the previous ping by the next one is
 * gone (its network dropped without a FIN) and is terminated, which kills its guest command.
 */
function pingEveryMs(): number {
  const n = Number(process.env.SMOL_API_WS_PING_MS ?? '');
  return Number.isInteger(n) && n > 0 ? n : 30_000;
}

let wss: WebSocketServer | undefined;
const server = () => (wss ??= new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME }));

/**
 * Output frames: the prefix byte then the bytes. Past SEND_HIGH_WATER unsent, the write completes only when
 * ws hands this frame to the socket (send's callback), so a slow client slows the guest, without a timer.
 */
function frames(ws: WebSocket, prefix: 1 | 2): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, cb) {
      if (ws.readyState !== ws.OPEN) return cb();
      const low = ws.bufferedAmount < SEND_HIGH_WATER;
      // a send error means the socket is gone: the close handler already aborts the command
      ws.send(Buffer.concat([Buffer.of(prefix), chunk]), { binary: true }, () => { if (!low) cb(); });
      if (low) cb();
    },
  });
}

/** The usual ws heartbeat. */
function heartbeat(ws: WebSocket, gone: AbortController): void {
  let answered = true;
  ws.on('pong', () => { answered = true; });
  const timer = setInterval(() => {
    if (!answered) { ws.terminate(); gone.abort(); return; }
    answered = false;
    ws.ping();
  }, pingEveryMs());
  timer.unref();
  ws.on('close', () => clearInterval(timer));
}

type Query = z.output<typeof wsExecQuerySchema>;
type Control = Exclude<z.output<typeof wsControlSchema>, { type: 'eof' }>;

function apply(h: ExecHandle, m: Control): void {
  if (m.type === 'resize') h.resize(m.rows, m.cols);
  else h.signal(m.signal);
}

function session(ws: WebSocket, run: (io: { stdin: PassThrough; stdout: Writable; stderr: Writable; signal: AbortSignal; onStart: (h: ExecHandle) => void }) => ReturnType<typeof execInMachine>, q: Query): void {
  const stdin = new PassThrough();
  const gone = new AbortController();
  let handle: ExecHandle | undefined;
  const early: Control[] = [];
  const sendError = (err: unknown) => ws.send(JSON.stringify({ type: 'error', ...httpError(err).body }));
  ws.on('close', () => gone.abort());
  heartbeat(ws, gone);
  // stdin ends at eof or when the command exits; an error there must not be an uncaught exception (the server)
  stdin.on('error', () => gone.abort());
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary) {
      // a frame after eof is dropped: writing after end would fail the stream
      if (stdin.writableEnded) return;
      if (stdin.writableLength + data.length > STDIN_UNREAD_MAX) {
        sendError(new UserError(`the command has left ${STDIN_UNREAD_MAX / 1024 / 1024} MiB of stdin unread, the most smol holds for it: the session is ended and the command killed`, {
          where: 'stdin', hint: 'Send stdin as the command reads it, or upload the data first (PUT /v1/machines/NAME/files) and redirect it.',
        }));
        ws.close(1009);
        gone.abort();
        return;
      }
      stdin.write(data);
      return;
    }
    const parsed = wsControlSchema.safeParse((() => { try { return JSON.parse(data.toString('utf8')) as unknown; } catch { return null; } })());
    if (!parsed.success) return sendError(new UserError('a text frame must be JSON {"type":"resize"|"signal"|"eof", ...}'));
    const m = parsed.data;
    if (m.type === 'eof') stdin.end();
    else if (!handle) early.push(m); // the command is still starting: applied once it runs
    else apply(handle, m);
  });
  void run({ stdin, stdout: frames(ws, 1), stderr: frames(ws, 2), signal: gone.signal, onStart: (h) => {
    handle = h;
    if (q.tty) h.resize(q.rows ?? 24, q.cols ?? 80);
    for (const m of early.splice(0)) apply(h, m);
  } })
    .then((r) => {
      if (ws.readyState !== ws.OPEN) return;
      ws.send(JSON.stringify({ type: 'exit', exitCode: exitCodeOf(r), signal: r.signal }));
      ws.close(1000);
    }, (err: unknown) => {
      if (ws.readyState !== ws.OPEN) return;
      sendError(err);
      ws.close(1011);
    });
}

export const routes: Route[] = [
  defineRoute({
    method: 'GET', path: '/v1/machines/{name}/exec/ws', operationId: 'execWebSocket', tags: ['exec'],
    summary: 'Interactive exec over a WebSocket: stdin as binary frames; resize, signal, eof as JSON; output frames prefixed 1/2; then exit',
    params: machineNameParamsSchema, query: wsExecQuerySchema,
    responses: {
      101: { description: 'switched to the WebSocket protocol', contentType: 'application/octet-stream' },
      404: { description: 'no such machine', schema: errorSchema }, 409: { description: 'the machine is not running', schema: errorSchema },
    },
    handle: () => Promise.reject(new ApiError(426, 'upgrade_required', 'this route is a WebSocket', { hint: 'Connect with a WebSocket client (Upgrade: websocket).' })),
    upgrade: ({ params, query, req, socket, head, ctx }) => {
      // checked before the upgrade: a missing or stopped machine is a plain HTTP error answer
      const rec = ctx.svc.refresh(ctx.svc.store.get(params.name));
      if (rec.state !== 'running') throw new ConflictError(`machine "${rec.name}" is not running (state: ${rec.state})`, { where: rec.name, hint: `Start it first: smol machine start ${rec.name}` });
      server().handleUpgrade(req, socket, head, (ws) => session(ws, (io) => ctx.metrics.time(ctx.metrics.execSeconds, () =>
        execInMachine(ctx.svc, params.name, { argv: query.argv, cwd: query.workdir, tty: query.tty, rows: query.rows, cols: query.cols }, io)), query));
    },
  }),
];

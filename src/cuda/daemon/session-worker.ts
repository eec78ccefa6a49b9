/**
 * Worker-thread entry: owns one guest connection (a socket fd) and the CUDA context(s) of that guest.
 * Reads frames with blocking syscalls, executes them in order, batches replies, and frees everything
 * when the connection ends. Frames that break the protocol end this session only.
 * This thread is never terminated from outside (koffi aborts the process if it is stopped inside a
 * call): it ends itself, at EOF on its socket (the acceptor shuts the socket down to stop it) or, as a
 * spare, on a stop message. The acceptor closes the fd once this thread has exited.
 */
import fs from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { loadCudaDriver } from './driver/cuda.js';
import { sys } from './driver/sys.js';
import { OP, OP_ROWS, PROTOCOL } from '../protocol/index.js';
import { ProtocolViolation, Session, STAT, u64, type Reply } from './session.js';

interface Init { fd: number; libcuda: string; quotaBytes: number; stats: SharedArrayBuffer; sessionId: number }
/** Spare workers start without a connection and wait for one (so a new guest does not wait for a
 *  thread, a module graph and the driver to load). */
const init = workerData as Init;
const HDR = PROTOCOL.headerSize;
const MAX = PROTOCOL.maxPayload;
const nargs = new Int32Array(256).fill(-1);
for (const r of OP_ROWS) nargs[r.id] = r.nargs;

const drv = loadCudaDriver(init.libcuda);

function main(): string {
  const io = sys();
  const session = new Session(drv, {
    quotaBytes: init.quotaBytes, stats: new Float64Array(init.stats), maxPayload: MAX, sessionId: init.sessionId,
    paramSource: process.env.SMOL_CUDA_PARAM_LAYOUT === 'image' ? 'image' : 'driver',
    // A direct write: this thread spends its life in blocking reads, so a stream might never flush.
    log: (line) => { try { fs.writeSync(2, `smol gpu: session ${init.sessionId}: ${line}\n`); } catch { /* no stderr */ } },
  });
  const rbuf = Buffer.allocUnsafeSlow(2 * (MAX + HDR));
  const wbuf = Buffer.allocUnsafeSlow(MAX + HDR + 4096);
  let start = 0, end = 0, wlen = 0;
  const args: number[] = [];
  let reason = 'guest disconnected';

  const flush = (): boolean => { const ok = wlen === 0 || io.writeAll(init.fd, wbuf, 0, wlen); wlen = 0; return ok; };
  const put = (op: number, seq: number, rep: Reply): boolean => {
    const blobLen = rep.blob ? rep.blobLen ?? rep.blob.length : 0;
    const len = rep.outs.length * 8 + blobLen;
    if (wlen + HDR + len > wbuf.length && !flush()) return false;
    wbuf.writeUInt32LE(len, wlen); wbuf.writeUInt16LE(op, wlen + 4); wbuf.writeUInt16LE(PROTOCOL.flags.reply, wlen + 6);
    wbuf.writeUInt32LE(seq, wlen + 8); wbuf.writeInt32LE(rep.status, wlen + 12);
    let o = wlen + HDR;
    for (const v of rep.outs) { wbuf.writeUInt32LE(v % 2 ** 32, o); wbuf.writeUInt32LE(Math.floor(v / 2 ** 32), o + 4); o += 8; }
    if (rep.blob && blobLen) { rep.blob.copy(wbuf, o, 0, blobLen); o += blobLen; }
    wlen = o;
    return true;
  };

  try {
    for (;;) {
      if (end === rbuf.length) {
        if (start === 0) throw new ProtocolViolation('frame larger than the receive buffer');
        rbuf.copy(rbuf, 0, start, end); end -= start; start = 0;
      }
      if (!flush()) { reason = 'write failed'; break; }
      const n = io.read(init.fd, rbuf, end, rbuf.length - end);
      if (n <= 0) break;
      end += n;
      while (end - start >= HDR) {
        const len = rbuf.readUInt32LE(start);
        if (len > MAX) throw new ProtocolViolation(`frame of ${len} bytes exceeds ${MAX}`);
        if (end - start < HDR + len) {
          if (start + HDR + len > rbuf.length) { rbuf.copy(rbuf, 0, start, end); end -= start; start = 0; }
          break;
        }
        const op = rbuf.readUInt16LE(start + 4), flags = rbuf.readUInt16LE(start + 6), seq = rbuf.readUInt32LE(start + 8);
        if (op === OP.LaunchKernel && (flags & PROTOCOL.flags.async)) {
          session.launchInPlace(rbuf, start + HDR, len);
          start += HDR + len;
          continue;
        }
        const na = nargs[op] ?? -1;
        if (na < 0 || len < na * 8) throw new ProtocolViolation(`bad frame: op ${op}, ${len} bytes`);
        args.length = na;
        for (let i = 0; i < na; i++) args[i] = u64(rbuf, start + HDR + i * 8);
        const blob = rbuf.subarray(start + HDR + na * 8, start + HDR + len);
        start += HDR + len;
        const isAsync = (flags & PROTOCOL.flags.async) !== 0;
        // A pending async failure is reported by the next synchronous call instead of running it.
        if (!isAsync && session.pending && op !== 1) {
          session.dispatch(3, [], blob);
          const r = session.pending; session.pending = 0;
          if (!put(op, seq, { status: r, outs: new Array(OP_ROWS.find((x) => x.id === op)?.nouts ?? 0).fill(0) })) { reason = 'write failed'; break; }
          continue;
        }
        const rep = session.dispatch(op, args, blob);
        if (!isAsync) {
          if (!put(op, seq, rep ?? { status: session.pending, outs: [] })) { reason = 'write failed'; break; }
          if (!rep) session.pending = 0;
        } else if (rep && rep.status) {
          if (!session.pending) session.pending = rep.status;
        }
      }
      if (start === end) start = end = 0;
    }
  } catch (err) {
    reason = err instanceof ProtocolViolation ? `protocol violation: ${err.message}` : `daemon error: ${(err as Error).stack ?? err}`;
  } finally {
    const t = performance.now();
    const stats = new Float64Array(init.stats);
    freedBytes = stats[STAT.memBytes];
    session.cleanup();
    // The guest sees EOF now; the fd itself stays open until the acceptor closes it after this thread exits.
    io.shutdown(init.fd);
    cleanupMs = performance.now() - t;
  }
  return reason;
}

let cleanupMs = 0, freedBytes = 0;
function run(): void {
  const reason = main();
  parentPort!.postMessage({ type: 'closed', reason, cleanupMs, freedBytes });
  parentPort!.close();
}
type Start = Pick<Init, 'fd' | 'stats' | 'sessionId'> | { type: 'stop' };
if (init.fd >= 0) run();
else {
  parentPort!.postMessage({ type: 'ready' }); // the driver is bound: a connection handed over now starts at once
  parentPort!.once('message', (m: Start) => {
    if ('type' in m) { parentPort!.close(); return; } // a spare the daemon no longer needs
    Object.assign(init, m);
    run();
  });
}

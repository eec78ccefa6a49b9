/**
 * The frame loop of one guest connection: reads frames with blocking syscalls, executes them in order
 * against the session, batches replies, and frees everything when the connection ends. Frames that break
 * the protocol end this session only. Runs in the session's own process (session-process.ts).
 */
import { sys } from './driver/sys.js';
import { OP, OP_ROWS, PROTOCOL } from '../protocol/index.js';
import { ProtocolViolation, Session, u64, type Reply } from './session.js';

const HDR = PROTOCOL.headerSize;
const MAX = PROTOCOL.maxPayload;
// Indexed by op id: the areas' ops run to 289, past a u8's range.
const OP_SLOTS = Math.max(...OP_ROWS.map((r) => r.id)) + 1;
const nargs = new Int32Array(OP_SLOTS).fill(-1);
const nouts = new Int32Array(OP_SLOTS).fill(0);
for (const r of OP_ROWS) { nargs[r.id] = r.nargs; nouts[r.id] = r.nouts; }

const EMPTY = Buffer.alloc(0);

export interface LoopResult { reason: string; cleanupMs: number }

/**
 * Serves `fd` until the guest hangs up. Until a HELLO succeeded, each read waits only for what is left of
 * `handshakeMs` (counted from here), so a connection that never handshakes cannot hold a session for ever.
 * After it, each wait for the next frame first polls for up to `spinUs` (see spinUsFor in server.ts).
 */
export function serveConnection(fd: number, session: Session, handshakeMs = Infinity, spinUs = 0): LoopResult {
  const io = sys();
  const rbuf = Buffer.allocUnsafeSlow(2 * (MAX + HDR));
  const wbuf = Buffer.allocUnsafeSlow(MAX + HDR + 4096);
  // Both buffers live outside the V8 heap and never move, so the syscalls take their addresses directly.
  const raddr = io.addressOf(rbuf), waddr = io.addressOf(wbuf);
  let start = 0, end = 0, wlen = 0;
  const args: number[] = [];
  let reason = 'guest disconnected';
  let deadline = performance.now() + handshakeMs;

  const spinMs = spinUs / 1000;
  // A guest's next call often follows its last reply within microseconds; polling for it keeps this thread
  // on its CPU, where sleeping in read() costs a wake-up per call. < 0: nothing came in time, sleep in read().
  const spin = (): number => {
    const until = performance.now() + spinMs;
    for (;;) {
      const n = io.recvNowAt(fd, raddr + end, rbuf.length - end);
      if (n >= 0 || performance.now() >= until) return n;
    }
  };
  const flush = (): boolean => { const ok = wlen === 0 || io.writeAllAt(fd, waddr, wlen); wlen = 0; return ok; };
  const put = (op: number, seq: number, rep: Reply): boolean => {
    const blobLen = rep.blob ? rep.blobLen ?? rep.blob.length : 0;
    const len = rep.outs.length * 8 + blobLen;
    if (wlen + HDR + len > wbuf.length && !flush()) return false;
    wbuf.writeUInt32LE(len, wlen); wbuf.writeUInt16LE(op, wlen + 4); wbuf.writeUInt16LE(PROTOCOL.flags.reply, wlen + 6);
    wbuf.writeUInt32LE(seq, wlen + 8); wbuf.writeInt32LE(rep.status, wlen + 12);
    let o = wlen + HDR;
    const outs = rep.outs;
    for (let i = 0; i < outs.length; i++) { const v = outs[i]; wbuf.writeUInt32LE(v % 2 ** 32, o); wbuf.writeUInt32LE(Math.floor(v / 2 ** 32), o + 4); o += 8; }
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
      if (deadline !== Infinity) {
        const left = Math.ceil(deadline - performance.now());
        if (left <= 0 || !io.readable(fd, left)) { reason = `no handshake within ${handshakeMs} ms`; break; }
      }
      let n = spinMs > 0 && deadline === Infinity ? spin() : -1;
      if (n < 0) n = io.readAt(fd, raddr + end, rbuf.length - end);
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
        // Most synchronous calls carry no trailing bytes: they share one empty view instead of making one.
        const blob = len === na * 8 ? EMPTY : rbuf.subarray(start + HDR + na * 8, start + HDR + len);
        start += HDR + len;
        const isAsync = (flags & PROTOCOL.flags.async) !== 0;
        // A pending async failure is reported by the next synchronous call instead of running it.
        if (!isAsync && session.pending && op !== 1) {
          session.dispatch(3, [], blob);
          const r = session.pending; session.pending = 0;
          if (!put(op, seq, { status: r, outs: new Array(nouts[op]).fill(0) })) { reason = 'write failed'; break; }
          continue;
        }
        const rep = session.dispatch(op, args, blob);
        if (op === OP.Hello && rep?.status === 0) deadline = Infinity;
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
  }
  const t = performance.now();
  try { session.cleanup(); } finally { io.close(fd); }
  return { reason, cleanupMs: performance.now() - t };
}

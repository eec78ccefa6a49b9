/**
 * The GPU daemon's side of a guest connection: the real frame loop (serveConnection) reading a guest's
 * bytes from a socketpair, decoding each op's arguments and blob, and dispatching them to a Session over
 * a driver stand-in that refuses out-of-bounds use (lib/fake-driver.ts). Module images in the stream go
 * through the session's image checks and the parameter-layout parsers (fatbin, cubin, PTX).
 * Properties: the loop ends with "guest disconnected", "write failed" or a protocol violation, never
 * with "daemon error" (an exception the session did not mean: a RangeError, or a DriverMisuse).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { koffiModule } from '../../../src/cuda/daemon/driver/cuda.js';
import { sys } from '../../../src/cuda/daemon/driver/sys.js';
import { Session, STAT } from '../../../src/cuda/daemon/session.js';
import { serveConnection } from '../../../src/cuda/daemon/session-loop.js';
import { OP, OP_ROWS, PROTO_HASH, PROTOCOL } from '../../../src/cuda/protocol/index.js';
import { encodeFrame } from '../../../src/cuda/protocol/frame.js';
import { DEVICE_BASE, FOREIGN, fakeDriver } from '../lib/fake-driver.js';
import { mutated } from '../lib/mutate.js';
import { FUZZ_DIR, FuzzFailure, type FuzzTarget } from '../lib/target.js';

const MAX_INPUT = 1 << 20;
const IMAGES = ['param_layouts.ptx', 'param_layouts.sm_90.cubin', 'param_layouts.compressed.fatbin', 'param_layouts.ptx-only.fatbin']
  .map((f) => readFileSync(path.join(FUZZ_DIR, '../fixtures/cuda-programs/param-layouts', f)));
const KERNELS = ['mixed', 'small', 'noargs', 'restricted', 'big_then_int', 'huge', 'unused', '_Z10cpp_kernelPfi'];

interface Pair { socketpair(fds: Buffer): number; setsockopt(fd: number, level: number, name: number, v: Buffer, n: number): number }
let pair: Pair | undefined;
function socketpair(): [number, number] {
  if (!pair) {
    const c = koffiModule().load('libc.so.6');
    pair = {
      socketpair: (fds) => c.func('int socketpair(int d, int type, int proto, void *sv)')(1, 1 | 0o2000000, 0, fds) as number,
      setsockopt: c.func('int setsockopt(int fd, int level, int name, const void *val, uint32_t len)') as Pair['setsockopt'],
    };
  }
  const fds = Buffer.alloc(8);
  if (pair.socketpair(fds) !== 0) throw new Error('socketpair failed');
  return [fds.readInt32LE(0), fds.readInt32LE(4)];
}

const id = (kind: number, n: number) => kind * 2 ** 48 + n;
const arg = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(0, 1, 2, 3, 4, 8, 16, 256, 4096, 2 ** 20, 2 ** 32 - 1, 2 ** 32, 2 ** 53, 2 ** 63,
    DEVICE_BASE, DEVICE_BASE + 8, DEVICE_BASE + 255, DEVICE_BASE + 0x100000, DEVICE_BASE + 0x200000, FOREIGN.base,
    id(1, 1), id(1, 0x100), id(2, 1), id(3, 1), id(3, 2), id(4, 3), id(5, 1), id(6, 1), id(7, 1)) },
  { weight: 1, arbitrary: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) },
);
const blob = fc.oneof(
  { weight: 3, arbitrary: fc.uint8Array({ maxLength: 96 }).map((u) => Buffer.from(u)) },
  { weight: 1, arbitrary: fc.constantFrom(...KERNELS).map((k) => Buffer.from(k, 'latin1')) },
  { weight: 1, arbitrary: fc.constantFrom(...IMAGES) },
);
const frame = fc.record({
  op: fc.oneof({ weight: 9, arbitrary: fc.constantFrom(...OP_ROWS.map((r) => r.id)) }, { weight: 1, arbitrary: fc.nat({ max: 0xffff }) }),
  flags: fc.constantFrom(0, 0, PROTOCOL.flags.async, 3),
  extra: fc.constantFrom(0, 0, 0, -1, 1),
  args: fc.array(arg, { maxLength: 10 }),
  blob,
}).map((f) => {
  const n = Math.max(0, (OP_ROWS.find((r) => r.id === f.op)?.nargs ?? f.args.length) + f.extra);
  const args = Array.from({ length: n }, (_, i) => f.args[i] ?? 0);
  return encodeFrame(f.op, args, { flags: f.flags, blob: f.blob, seq: 1 });
});
const hello = encodeFrame(OP.Hello, [PROTOCOL.magic, PROTO_HASH, 1, 0]);
const structured = fc.tuple(fc.boolean(), fc.array(frame, { maxLength: 24 }))
  .map(([greet, frames]) => Buffer.concat([...(greet ? [hello] : []), ...frames]))
  .filter((b) => b.length <= MAX_INPUT);

/** The last loop's end reason, for checks that the generator reaches past the handshake. */
export const cudaSessionStats = { last: '' };

export const cudaSession: FuzzTarget = {
  name: 'cuda-session',
  arbitrary: (seeds) => fc.oneof(structured, mutated(seeds, { maxLength: MAX_INPUT })),
  run(input) {
    const [guest, daemon] = socketpair();
    const io = sys();
    const big = Buffer.alloc(4); big.writeInt32LE(8 << 20);
    pair!.setsockopt(guest, 1, 32 /* SO_SNDBUFFORCE: the whole input fits before the loop reads */, big, 4);
    const ok = io.writeAll(guest, input, 0, input.length);
    // The guest hangs up after its last byte: replies fail with EPIPE and the loop ends on its own.
    io.close(guest);
    const session = new Session(fakeDriver(), { quotaBytes: 1 << 20, stats: new Float64Array(STAT.size), maxPayload: PROTOCOL.maxPayload, sessionId: 1, paramSource: 'image' });
    const { reason } = serveConnection(daemon, session);
    cudaSessionStats.last = reason;
    if (!ok) throw new Error('could not queue the input on the socketpair');
    if (reason.startsWith('daemon error')) throw new FuzzFailure(`session loop failed: ${reason.split('\n').slice(0, 4).join(' | ')}`);
    return Promise.resolve();
  },
};

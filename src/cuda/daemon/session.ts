/**
 * One guest process's view of the GPU. Runs inside the session's own process; `dispatch` executes one
 * decoded frame through the op's handler (ops/*.ts), which reads its arguments by name from a view of the
 * frame. The handles, allocations and checks the handlers share are SessionState's.
 */
import { CudaError } from '../../errors/index.js';
import type { CudaDriver } from './driver/cuda.js';
import { OP, OP_ROWS, type ArgView } from '../protocol/index.js';
import { HANDLER_BY_ID, argViewsById, launchInPlace } from './ops/index.js';
import { releaseStreamWaits } from './ops/copies.js';
import { ProtocolViolation, STAT, SessionState, type Reply, type SessionOptions } from './session-state.js';

export { CU, ProtocolViolation, STAT, u64, type Reply, type SessionOptions } from './session-state.js';

/** Results each op's reply carries: an error reply carries them too (zeros), or the shim reads it as malformed. */
const NOUTS = new Map(OP_ROWS.map((r) => [r.id, r.nouts]));

export class Session extends SessionState {
  private readonly views: (ArgView | undefined)[];
  constructor(drv: CudaDriver, opts: SessionOptions) {
    super(drv, opts);
    this.views = argViewsById();
  }

  /** Executes one frame. `a` holds the u64 args as numbers, `blob` the trailing bytes (a view into the
   *  receive buffer, valid only during this call). Returns null for fire-and-forget ops. */
  dispatch(op: number, a: readonly number[], blob: Buffer): Reply | null {
    this.stats[STAT.calls]++;
    if (!this.helloDone && op !== OP.Hello) throw new ProtocolViolation('first frame must be Hello');
    const handler = HANDLER_BY_ID[op];
    if (!handler) throw new ProtocolViolation(`unknown op ${op}`);
    try {
      return handler(this, this.views[op]!.at(a), blob);
    } catch (err) {
      if (!(err instanceof CudaError)) throw err;
      return { status: err.cuResult, outs: new Array<number>(NOUTS.get(op) ?? 0).fill(0) };
    }
  }

  /** The hot path: a fire-and-forget launch decoded in place from the receive buffer. */
  launchInPlace(b: Buffer, off: number, len: number): void {
    this.stats[STAT.calls]++;
    if (!this.helloDone) throw new ProtocolViolation('first frame must be Hello');
    launchInPlace(this, b, off, len);
  }

  /** Frees everything the guest held: called when its connection ends, however it ended. */
  cleanup(): void {
    const d = this.drv;
    releaseStreamWaits(this);
    for (const s of this.streams.values()) d.cuStreamDestroy(s);
    for (const e of this.events.values()) d.cuEventDestroy(e);
    for (const [p, a] of this.allocs) {
      if (a.ctx < 0) continue;
      d.cuCtxSetCurrent(a.ctx);
      d.cuMemFree(p);
    }
    for (const c of this.cleanups) c();
    for (const m of this.modules.values()) (m.lib ? d.cuLibraryUnload : d.cuModuleUnload)(m.host);
    for (const h of this.ctxs.values()) d.cuCtxDestroy(h);
    d.cuCtxSetCurrent(0);
    this.streams.clear(); this.events.clear(); this.allocs.clear(); this.bases = []; this.modules.clear(); this.ctxs.clear();
    this.memBytes = 0;
    this.stats[STAT.memBytes] = 0; this.stats[STAT.allocs] = 0;
  }
}

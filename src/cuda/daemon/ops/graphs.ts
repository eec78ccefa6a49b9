/**
 * Stream capture and graphs (ops of spec-areas/graphs.ts). The host driver does the capturing: work the
 * guest issues on a capturing stream reaches this session in order and the driver records it. Graph and
 * exec ids are minted by the guest; this table maps them to the driver's handles, so a guest can only
 * instantiate, launch or destroy its own.
 */
import { CudaError } from '../../../errors/index.js';
import { CU, type OpHandlers, type SessionState } from '../session-state.js';

const CAPTURE_RELAXED = 2, CAPTURE_INVALIDATED = 901, ILLEGAL_STATE = 401;

interface GraphState {
  readonly graphs: Map<number, number>;
  readonly execs: Map<number, number>;
  /** capturing stream id -> the graph id its capture fills (the graph may not be destroyed meanwhile) */
  readonly captures: Map<number, number>;
}
const STATE = new WeakMap<SessionState, GraphState>();
const out3 = [0];
const updateInfo = Buffer.alloc(24);

function state(s: SessionState): GraphState {
  let g = STATE.get(s);
  if (!g) {
    const st: GraphState = { graphs: new Map(), execs: new Map(), captures: new Map() };
    STATE.set(s, st);
    s.cleanups.push(() => {
      for (const x of st.execs.values()) s.drv.cuGraphExecDestroy(x);
      for (const h of st.graphs.values()) s.drv.cuGraphDestroy(h);
      st.execs.clear(); st.graphs.clear(); st.captures.clear();
    });
    g = st;
  }
  return g;
}
/** A stream the guest created (capture never uses the legacy or per-thread streams here). */
function ownStream(s: SessionState, id: number): number {
  if (id <= 2) throw new CudaError('capture on a default stream', CU.notSupported);
  return s.stream(id);
}
const fresh = (m: Map<number, number>, id: number) => { if (m.has(id)) throw new CudaError('id in use', CU.invalidHandle); };

export const graphOps = {
  StreamBeginCapture(s, a) {
    const g = state(s), st = ownStream(s, a.stream), d = s.drv;
    fresh(g.graphs, a.graph);
    if (a.mode > CAPTURE_RELAXED) return s.ret(CU.invalidValue);
    let r = d.cuStreamBeginCapture(st, CAPTURE_RELAXED);
    if (r) return s.ret(r);
    r = d.cuStreamGetCaptureInfo(st, s.out1, s.out2, out3, null, null, null);
    if (r) { d.cuStreamEndCapture(st, s.out1); if (s.out1[0]) d.cuGraphDestroy(s.out1[0]); return s.ret(r); }
    g.graphs.set(a.graph, s.num(out3[0]));
    g.captures.set(a.stream, a.graph);
    return s.ret(CU.ok);
  },
  StreamEndCapture(s, a) {
    const g = state(s), st = ownStream(s, a.stream), d = s.drv;
    const gid = g.captures.get(a.stream);
    if (gid === undefined) return s.ret(ILLEGAL_STATE);
    let r = d.cuStreamEndCapture(st, s.out1);
    const host = s.num(s.out1[0]);
    // 0, 901 and 904 end the sequence; anything else leaves it running, as the driver does.
    if (r && r !== CAPTURE_INVALIDATED && r !== 904) return s.ret(r);
    g.captures.delete(a.stream);
    if (!r && a.invalidated) { d.cuGraphDestroy(host); r = CAPTURE_INVALIDATED; }
    if (r) g.graphs.delete(gid); else g.graphs.set(gid, host);
    return s.ret(r);
  },
  StreamCaptureStatus(s, a) {
    const r = s.drv.cuStreamGetCaptureInfo(ownStream(s, a.stream), s.out1, s.out2, out3, null, null, null);
    return s.ret(r, r ? [0, 0] : [s.out1[0], s.num(s.out2[0])]);
  },
  GraphCreate(s, a) {
    const g = state(s);
    fresh(g.graphs, a.graph);
    const r = s.drv.cuGraphCreate(s.out1, a.flags);
    if (!r) g.graphs.set(a.graph, s.num(s.out1[0]));
    return s.fire(r);
  },
  GraphDestroy(s, a) {
    const g = state(s), h = s.lookup(g.graphs, a.graph);
    for (const gid of g.captures.values()) if (gid === a.graph) return s.fire(CU.invalidValue);
    g.graphs.delete(a.graph);
    return s.fire(s.drv.cuGraphDestroy(h));
  },
  GraphInstantiate(s, a) {
    const g = state(s), h = s.lookup(g.graphs, a.graph);
    fresh(g.execs, a.exec);
    const r = s.drv.cuGraphInstantiateWithFlags(s.out1, h, a.flags);
    if (!r) g.execs.set(a.exec, s.num(s.out1[0]));
    return s.ret(r);
  },
  GraphExecDestroy(s, a) {
    const g = state(s), x = s.lookup(g.execs, a.exec);
    g.execs.delete(a.exec);
    return s.fire(s.drv.cuGraphExecDestroy(x));
  },
  GraphLaunch: (s, a) => s.fire(s.drv.cuGraphLaunch(s.lookup(state(s).execs, a.exec), s.stream(a.stream))),
  GraphUpload: (s, a) => s.fire(s.drv.cuGraphUpload(s.lookup(state(s).execs, a.exec), s.stream(a.stream))),
  GraphExecUpdate(s, a) {
    const g = state(s);
    updateInfo.fill(0);
    const r = s.drv.cuGraphExecUpdate(s.lookup(g.execs, a.exec), s.lookup(g.graphs, a.graph), updateInfo);
    return s.ret(r, [updateInfo.readInt32LE(0)]);
  },
  GraphNodeCount(s, a) {
    const h = s.lookup(state(s).graphs, a.graph);
    const r = (a.root ? s.drv.cuGraphGetRootNodes : s.drv.cuGraphGetNodes)(h, null, s.out1);
    return s.ret(r, [r ? 0 : s.num(s.out1[0])]);
  },
} satisfies Partial<OpHandlers>;

/** Wire ops for stream capture and graphs: ids 100-139, append-only like every op (see spec.ts). */
import { fire, op, type OpSpec } from '../spec-op.js';

export const graphOpSpecs: readonly OpSpec[] = [
  // `graph` is minted by the guest at begin; the host capture is always relaxed (the shim enforces the
  // guest's mode, since all guest threads share one host thread).
  op(100, 'StreamBeginCapture', ['stream', 'mode', 'graph']),
  // `invalidated`: the shim refused a call that invalidates the capture; the host graph is discarded.
  op(101, 'StreamEndCapture', ['stream', 'invalidated']),
  op(102, 'StreamCaptureStatus', ['stream'], ['status', 'id']),
  fire(103, 'GraphCreate', ['graph', 'flags']),
  fire(104, 'GraphDestroy', ['graph']),
  op(105, 'GraphInstantiate', ['exec', 'graph', 'flags']),
  fire(106, 'GraphExecDestroy', ['exec']),
  fire(107, 'GraphLaunch', ['exec', 'stream']),
  fire(108, 'GraphUpload', ['exec', 'stream']),
  op(109, 'GraphExecUpdate', ['exec', 'graph'], ['result']),
  // node counts only (`root` 1: cuGraphGetRootNodes): the shim names no nodes
  op(110, 'GraphNodeCount', ['graph', 'root'], ['count']),
];

/** Wire ops for 2D/3D copies and memsets, stream memory operations, peer and IPC queries: ids 180-209, append-only like every op (see spec.ts). */
import { fire, op, type OpSpec } from '../spec-op.js';

export const copyOpSpecs: readonly OpSpec[] = [
  // 2D/3D copies: the shim reduces every copy to rows of `width` bytes; host rows travel packed (no pitch gaps).
  fire(180, 'Memcpy2dHtoD', ['dst', 'dpitch', 'width', 'rows', 'stream', 'isAsync'], { blobIn: 'rows * width bytes, packed' }),
  op(181, 'Memcpy2dDtoH', ['src', 'spitch', 'width', 'rows', 'stream'], [], { blobOut: 'rows * width bytes, packed' }),
  fire(182, 'Memcpy3dDtoD', ['dst', 'dpitch', 'dheight', 'src', 'spitch', 'sheight', 'width', 'rows', 'depth', 'stream', 'isAsync']),
  fire(183, 'Memset2d', ['dst', 'pitch', 'value', 'elemSize', 'width', 'height', 'stream', 'isAsync']),
  // stream memory operations: kind is a CUstreamBatchMemOpType; a 64-bit value travels as two 32-bit words
  fire(184, 'StreamMemOp', ['stream', 'kind', 'addr', 'valueLo', 'valueHi', 'flags']),
  // peers: attrib 0 asks cuDeviceCanAccessPeer, otherwise a CUdevice_P2PAttribute
  op(185, 'DevicePeerQuery', ['attrib', 'dev', 'peer'], ['value']),
  op(186, 'CtxPeerAccess', ['peerCtx', 'flags', 'enable']),
];

/** Wire ops for module loading variants and context, stream and module queries: ids 250-289, append-only like every op (see spec.ts). */
import { fire, op, type OpSpec } from '../spec-op.js';

const JIT_OPTS = 'nopts (u64 CUjit_option, u64 value) pairs, scalar options only';
const JIT_OUT = 'nopts u64 option values as the driver left them, then infoLen bytes of info log, errLen of error log';

export const queryOpSpecs: readonly OpSpec[] = [
  op(250, 'ModuleLoadDataEx', ['module', 'nopts'], ['infoLen', 'errLen'], { blobIn: `${JIT_OPTS}, then the image`, blobOut: JIT_OUT }),
  op(251, 'LinkCreate', ['link', 'nopts'], ['infoLen', 'errLen'], { blobIn: JIT_OPTS, blobOut: JIT_OUT }),
  op(252, 'LinkAddData', ['link', 'type', 'nopts', 'nameLen'], ['infoLen', 'errLen'], { blobIn: `${JIT_OPTS} (no logs), name, data`, blobOut: `${JIT_OUT} (the link's)` }),
  op(253, 'LinkComplete', ['link'], ['infoLen', 'errLen', 'cubinLen'], { blobOut: `${JIT_OUT}, then the cubin` }),
  fire(254, 'LinkDestroy', ['link']),
  op(255, 'ModuleFunctionCount', ['module'], ['count']),
  op(256, 'ModuleEnumerate', ['module', 'max'], ['count'], { blobOut: 'count NUL-terminated function names' }),
  op(257, 'CtxGetCacheConfig', [], ['config']),
  op(258, 'CtxSetCacheConfig', ['config']),
  op(259, 'CtxGetSharedMemConfig', [], ['config']),
  op(260, 'CtxSetSharedMemConfig', ['config']),
  op(261, 'CtxResetPersistingL2Cache', []),
  op(262, 'CtxGetExecAffinity', ['type'], ['value']),
  op(263, 'DeviceGetExecAffinitySupport', ['type', 'dev'], ['value']),
  op(264, 'DeviceGetTexture1DLinearMaxWidth', ['format', 'channels', 'dev'], ['width']),
  op(265, 'FlushGPUDirectRDMAWrites', ['target', 'scope']),
  op(266, 'StreamGetAttribute', ['stream', 'attr'], [], { blobOut: 'CUstreamAttrValue (64 bytes)' }),
  op(267, 'StreamSetAttribute', ['stream', 'attr'], [], { blobIn: 'CUstreamAttrValue (64 bytes)' }),
  op(268, 'StreamCopyAttributes', ['dst', 'src']),
];

/** Driver entry points for stream capture and graphs (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

export const graphSigs = {
  cuStreamBeginCapture: ['cuStreamBeginCapture_v2', 'int NAME(uint64_t s, int mode)'],
  cuStreamEndCapture: ['cuStreamEndCapture', 'int NAME(uint64_t s, _Out_ uint64_t *g)'],
  cuStreamGetCaptureInfo: ['cuStreamGetCaptureInfo_v3', 'int NAME(uint64_t s, _Out_ int *status, _Out_ uint64_t *id, _Out_ uint64_t *g, void *deps, void *edges, void *n)'],
  cuGraphCreate: ['cuGraphCreate', 'int NAME(_Out_ uint64_t *g, unsigned int flags)'],
  cuGraphDestroy: ['cuGraphDestroy', 'int NAME(uint64_t g)'],
  cuGraphInstantiateWithFlags: ['cuGraphInstantiateWithFlags', 'int NAME(_Out_ uint64_t *x, uint64_t g, uint64_t flags)'],
  cuGraphExecDestroy: ['cuGraphExecDestroy', 'int NAME(uint64_t x)'],
  cuGraphLaunch: ['cuGraphLaunch', 'int NAME(uint64_t x, uint64_t s)'],
  cuGraphUpload: ['cuGraphUpload', 'int NAME(uint64_t x, uint64_t s)'],
  cuGraphGetNodes: ['cuGraphGetNodes', 'int NAME(uint64_t g, void *nodes, _Out_ uint64_t *n)'],
  cuGraphGetRootNodes: ['cuGraphGetRootNodes', 'int NAME(uint64_t g, void *nodes, _Out_ uint64_t *n)'],
  cuGraphExecUpdate: ['cuGraphExecUpdate_v2', 'int NAME(uint64_t x, uint64_t g, void *info)'],
} as const satisfies SigTable;

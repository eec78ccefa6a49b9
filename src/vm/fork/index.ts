export { forkMachine, type ForkOptions, type ForkResult } from './fork.js';
export type { CloneOutcome } from './clone.js';
export { cloneNames, cloneEnv, parseEnvFlags, parentEnv, MAX_CLONES } from './plan.js';
export { identityMismatch, assertCompatible } from './identity.js';
export { FORK_READY_PATH, FORK_READY_SCRIPT, FORK_ENV_FILE, envFileText } from './guest.js';
export { releaseForkPoints } from './cleanup.js';
export { sparseCopy } from './sparse-copy.js';
export type { ForkOps, VmIdentity, MemoryMode, CaptureRequest, CaptureResult, Inspection } from './types.js';

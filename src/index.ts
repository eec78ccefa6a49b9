/** The programmatic API: everything the CLI does is a function here (DESIGN.md §1). */
export * from './errors/index.js';
export { smolHome, dataPaths } from './util/paths.js';
export { AgentClient } from './vm/agent/index.js';
export { MachineService } from './vm/service.js';
export { runEphemeral } from './vm/run.js';
export { execInMachine, copy } from './vm/exec.js';
export { createQemuEngine } from './vm/qemu-engine.js';
export { parseSmolfile, loadSmolfile } from './smolfile/load.js';
export { smolfileSchema, type Smolfile } from './smolfile/schema.js';
export * from './artifact/index.js';
export { startGpuDaemon, queryGpuDaemon } from './cuda/daemon/index.js';
export { forkMachine } from './vm/fork/index.js';
export * from './ledger/index.js';
export * from './rollout/index.js';
export { pullImage, listImages, removeImage, pruneImages, type ImagePullResult, type ImageEntry, type PruneResult } from './vm/image/index.js';
export { parseImageReference, parseWwwAuthenticate, RegistryClient, loginRegistry, logoutRegistry, type ImageReference } from './registry/index.js';

/** The programmatic API: everything the CLI does is a function here (DESIGN.md §1). */
export * from './errors/index.js';
export { smolHome, dataPaths } from './util/paths.js';
export { AgentClient, MachineService, runEphemeral, execInMachine, copy, createQemuEngine } from './vm/index.js';
export { parseSmolfile, loadSmolfile } from './smolfile/load.js';
export { smolfileSchema, type Smolfile } from './smolfile/schema.js';
export * from './artifact/index.js';
export { startGpuDaemon, queryGpuDaemon } from './cuda/daemon/index.js';
export { forkMachine } from './vm/index.js';
export * from './ledger/index.js';
export * from './rollout/index.js';
export { updateMachine, type SpecPatch, type LabelPatch } from './vm/index.js';
export { pruners, pruneAll, pruneMachines, pruneBootSnapshots, pruneArtifacts, type PruneResult, type Pruner } from './vm/index.js';
export { parseLabelFlags, parseFilters, matchesLabels } from './smolfile/labels.js';
export { resolveSecrets } from './vm/index.js';
export { pullImage, listImages, removeImage, pruneImages, type ImagePullResult, type ImageEntry, type ImagePruneResult } from './vm/index.js';
export { parseImageReference, parseWwwAuthenticate, RegistryClient, loginRegistry, logoutRegistry, type ImageReference } from './registry/index.js';

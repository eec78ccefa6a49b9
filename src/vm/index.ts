/**
 * The machine API: the one module outside src/vm imports from vm, with the rooms under api/ that the CLI enters
 * directly so that a command loads only what it needs (a CLI command importing this file would load all of vm:
 * ~60 modules and the CUDA daemon more than `smol machine ls` needs). eslint.config.js refuses any other import of
 * a vm file from outside vm. What each export does is written beside it in its room.
 */
export * from './api/machines.js'; // create, start, stop, list machines; the database and engine; logs, usage, volumes
export * from './api/exec.js'; // exec and copy in a running machine; secrets
export * from './api/run.js'; // smol run: a throwaway machine, foreground or detached
export * from './api/fork.js'; // fork clones, fork points
export * from './api/images.js'; // guest images
export * from './api/prune.js'; // smol prune
export * from './api/pack.js'; // the pack source, resume
export * from './api/prefetch.js'; // the early image fingerprint
export * from './api/host.js'; // doctor, setup
export * from './api/limits.js'; // timeouts and limits the CLI shows in help or shares (kill grace, cleanup bound)

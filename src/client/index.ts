/**
 * The TypeScript SDK of `smol serve` (`import { Smol } from 'smol/client'`; docs/api.md, TypeScript SDK).
 * It imports nothing of smol's own src: its types come from docs/openapi.json (schema.ts, `npm run gen:client`).
 */
/// <reference lib="esnext.disposable" preserve="true" />
export { Smol, Machines, type CreateOptions, type Health, type ListOptions, type MachineState, type RunOptions } from './smol.js';
export { Machine, type MachineInfo, type StopOptions, type UpdateOptions } from './machine.js';
export type { ExecOptions, ExecResult } from './exec.js';
export { Points, type Clones, type ForkOptions, type ForkPoint, type PointForkOptions, type SavedPoint } from './fork.js';
export { Files, type DirEntry, type DirListing, type ReadOptions, type TarUploaded } from './files.js';
export { defaultSocketPath, type SmolOptions } from './transport.js';
export { SseParser, sseEvents, type SseEvent } from './sse.js';
export * from './errors.js';
export type { components, paths } from './schema.js';

/**
 * Machines: their database, the lifecycle service and the QEMU engine under it, and what the CLI reads about a
 * machine (detached state, usage, console log, network denials) and its fork points. Every module here is one the
 * service loads anyway, so a command that builds the service pays nothing more for this door.
 */

/** Create, start, stop, remove, list and look up machines; owns the store and the engine (one per data dir). */
export { MachineService, type CreateOptions, type StartOptions, type OpenChannel } from '../service.js';
/** The machine database (SQLite, from `openMachineDb`) and whether a recorded QEMU pid is still alive. */
export { MachineStore, pidAlive, pulledArtifactLock, type MachineRecord, type MachineState } from '../store/machines.js';
/** Opens (and migrates) the SQLite file that holds machines and fork points. */
export { openMachineDb } from '../store/db.js';
/** The one `Engine`: boots, stops and talks to machines through QEMU; `notice` hears one-off host notes (TCG). */
export { createQemuEngine, type QemuEngineOptions } from '../qemu/engine.js';
export type { Engine, Progress } from '../engine.js';

/** A detached `smol run -d` machine: its supervisor's state, its output file, and the refusal to restart it. */
export { readDetached, detachedOutputFile, refuseRestart, type DetachedState } from '../detach-state.js';
/** Memory (from /proc smaps) and disk (qcow2 chain) a machine uses, for `machine view`. */
export { diskUsage, memoryUsage, type DiskUsage, type MemoryUsage } from '../usage.js';
/** `-v HOST:GUEST[:ro]` flags: parsed, labelled for errors, and checked against the host-volume policy. */
export { checkVolumes, flagLabel, parseVolumeFlag, type HostVolume } from '../volumes/spec.js';
/** Host ports a machine will forward: refused before boot when another process holds one. */
export { checkPortsFree } from '../net/ports.js';
/** Connections and DNS names the network policy refused, from a machine's logs (`machine logs --denied`). */
export { readDenials, type Denial } from '../net/denials.js';
/** `machine logs`: a log (and its rotated generation) printed a chunk at a time, or its last N lines, then followed. */
export { pumpConsoleLog, type LogFollower } from '../qemu/console.js';
/** `smol machine update`: a stopped machine's spec and labels changed in place. */
export { updateMachine, type SpecPatch, type LabelPatch, type UpdateResult } from '../update.js';
/** The host side of the guest agent protocol (docs/agent-protocol.md). */
export { AgentClient } from '../agent/index.js';
/** `smol snapshot ls` and `rm`: fork points as listed, and removed once no clone needs them (saving and cloning: fork.ts). */
export { listPoints, removePoint, type PointView } from '../fork/points.js';
/** The fork-point table of the machine database. */
export { ForkPointStore, type ForkPointRecord } from '../store/fork-points.js';
/** `smol machine pause [--to-disk]` and `resume`: the vCPUs stopped, or RAM and device state saved and QEMU ended (docs/pause.md). */
export { pauseMachine, resumeMachine } from '../pause.js';

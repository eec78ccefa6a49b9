/** Where a machine's files live. Sockets go under a short per-home dir because unix paths max out at 107 bytes. */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dataPaths } from '../util/paths.js';

export interface MachineLayout {
  dir: string;
  disk: string;
  consoleLog: string;
  qemuLog: string;
  pidFile: string;
  runDir: string;
  qmpSocket: string;
  /** One socket per virtio-serial port: several smol processes can talk to one machine at once. */
  agentSockets: string[];
  memFile: string;
}

export const AGENT_PORTS = 4;

export function runRoot(home: string): string {
  const tag = crypto.createHash('sha256').update(home).digest('hex').slice(0, 10);
  return path.join(os.tmpdir(), `smol-${tag}`);
}

export function machineLayout(home: string, id: string): MachineLayout {
  const dir = path.join(dataPaths(home).machines, id);
  const runDir = path.join(runRoot(home), id);
  return {
    dir,
    disk: path.join(dir, 'disk.qcow2'),
    consoleLog: path.join(dir, 'console.log'),
    qemuLog: path.join(dir, 'qemu.log'),
    pidFile: path.join(dir, 'qemu.pid'),
    runDir,
    qmpSocket: path.join(runDir, 'qmp.sock'),
    agentSockets: Array.from({ length: AGENT_PORTS }, (_, i) => path.join(runDir, `agent${i}.sock`)),
    memFile: path.join('/dev/shm', `smol-${id}.mem`),
  };
}

/**
 * A forkable machine (and the one a boot snapshot is saved from) keeps its RAM in memFile, under /dev/shm.
 * Where /dev/shm has less room than the guest (containers default to 64 MiB) the guest would die of SIGBUS
 * as it touched more: callers refuse or boot plainly instead. Restoring a snapshot needs no /dev/shm.
 */
export function shmHasRoom(memoryMiB: number, shm = '/dev/shm'): boolean {
  try {
    const st = fs.statfsSync(shm);
    return st.bavail * st.bsize >= memoryMiB * 2 ** 20;
  } catch {
    return false;
  }
}

/** The QEMU that QEMU's own pidfile names, if it is still this machine's (a recycled pid is not). */
export function strayQemuPid(layout: Pick<MachineLayout, 'pidFile' | 'dir'>): number | null {
  try {
    const pid = Number.parseInt(fs.readFileSync(layout.pidFile, 'utf8'), 10);
    if (!(pid > 0)) return null;
    process.kill(pid, 0);
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(layout.dir) ? pid : null;
  } catch {
    return null;
  }
}

/**
 * What a machine really costs the host, split into what it shares with its family and what is its own:
 * clones map their fork point's memory template copy-on-write and sit on frozen overlays, so the RSS and the
 * file sizes alone would count the shared part once per clone.
 */
import fs from 'node:fs';
import path from 'node:path';
import { readQcow2Header } from './image/qcow2.js';

export interface MemoryUsage {
  /** Resident in the QEMU process, shared pages counted in full. */
  rssMiB: number;
  /** Proportional set size: each shared page divided among the processes mapping it. */
  pssMiB: number;
  /** Pages only this machine maps (its copy-on-write writes, QEMU's own heap). */
  privateMiB: number;
  /** Pages also mapped by other processes (the fork template, shared libraries). */
  sharedMiB: number;
}

export interface DiskUsage {
  /** Allocated bytes of the overlay this machine writes to. */
  privateBytes: number;
  /** Allocated bytes of the read-only files under it (frozen fork overlays, the image base), shared with others. */
  sharedBytes: number;
  /** The backing chain, top first. */
  chain: string[];
}

export interface MachineUsage { memory: MemoryUsage | null; disk: DiskUsage | null }

const KIB_PER_MIB = 1024;

/** Parses /proc/PID/smaps_rollup; null when the process is gone or not ours to read. */
export function memoryUsage(pid: number | null): MemoryUsage | null {
  if (!pid) return null;
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  } catch {
    return null;
  }
  return parseSmapsRollup(text);
}

export function parseSmapsRollup(text: string): MemoryUsage | null {
  const kb = (field: string): number | null => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return m ? Number(m[1]) : null;
  };
  const rss = kb('Rss');
  const pss = kb('Pss');
  if (rss === null || pss === null) return null;
  const mib = (n: number) => Math.round((n / KIB_PER_MIB) * 10) / 10;
  return {
    rssMiB: mib(rss), pssMiB: mib(pss),
    privateMiB: mib((kb('Private_Clean') ?? 0) + (kb('Private_Dirty') ?? 0)),
    sharedMiB: mib((kb('Shared_Clean') ?? 0) + (kb('Shared_Dirty') ?? 0)),
  };
}

const MAX_CHAIN = 64;

/** The backing file a qcow2 header names (resolved against the image's directory), or null (none, or not qcow2). */
export function qcow2Backing(file: string): string | null {
  let backing: string | null;
  try {
    backing = readQcow2Header(file).backing;
  } catch {
    return null;
  }
  return backing === null ? null : path.resolve(path.dirname(file), backing);
}

/** Walks the disk's backing chain; null when the machine has no disk (diskless or not made yet). */
export function diskUsage(top: string): DiskUsage | null {
  if (!fs.existsSync(top)) return null;
  const chain: string[] = [];
  let sharedBytes = 0;
  for (let f: string | null = top; f && chain.length < MAX_CHAIN; f = qcow2Backing(f)) {
    let st: fs.Stats;
    try {
      st = fs.statSync(f);
    } catch {
      break; // a missing backing file: the chain is broken, report what exists
    }
    if (chain.length) sharedBytes += st.blocks * 512;
    chain.push(f);
  }
  return { privateBytes: fs.statSync(top).blocks * 512, sharedBytes, chain };
}

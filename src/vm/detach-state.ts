/** The state of a `smol run -d` machine's command, kept in its directory (see detach.ts). */
import fs from 'node:fs';
import path from 'node:path';
import { ConflictError } from '../errors/index.js';
import type { MachineRecord } from './store/machines.js';
import type { MachineLayout } from './layout.js';

interface HasLayout { layout(rec: MachineRecord): MachineLayout }

export interface DetachedState {
  command: string[];
  rm: boolean;
  supervisorPid: number | null;
  /** booting → running → exited; `exitCode` is the command's (128+N for a signal, 124 for --timeout). */
  state: 'booting' | 'running' | 'exited';
  exitCode: number | null;
  /** Why the command did not run or finish (boot failure, the machine stopped under it). */
  error: string | null;
  startedAt: string;
  endedAt: string | null;
}

export const files = (dir: string) => ({
  state: path.join(dir, 'detached.json'), request: path.join(dir, 'detached-request.json'),
  output: path.join(dir, 'output.log'), supervisorLog: path.join(dir, 'supervisor.log'),
});

export function detachedOutputFile(svc: HasLayout, rec: MachineRecord): string {
  return files(svc.layout(rec).dir).output;
}

export function readDetached(svc: HasLayout, rec: MachineRecord): DetachedState | null {
  try {
    return JSON.parse(fs.readFileSync(files(svc.layout(rec).dir).state, 'utf8')) as DetachedState;
  } catch {
    return null;
  }
}

/** A kept (`--no-rm`) detached run that has exited: its record stays although its owner is gone. */
export function isKeptDetached(svc: HasLayout, rec: MachineRecord): boolean {
  const d = rec.ephemeral ? readDetached(svc, rec) : null;
  return !!d && !d.rm && d.state === 'exited';
}

/** A throwaway machine never boots twice: it has no command to run and (on the default image) no disk. */
export function refuseRestart(rec: MachineRecord): void {
  if (rec.ephemeral && rec.state !== 'running') {
    throw new ConflictError(`machine "${rec.name}" is a throwaway machine (smol run) and cannot be started again`, { where: rec.name, hint: `Read its output with smol machine logs ${rec.name}, then remove it: smol machine rm ${rec.name}` });
  }
}

export function writeJson(file: string, value: unknown): void {
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(value));
  fs.renameSync(`${file}.tmp`, file);
}

export function updateDetached(file: string, fields: Partial<DetachedState>): void {
  try {
    writeJson(file, { ...(JSON.parse(fs.readFileSync(file, 'utf8')) as DetachedState), ...fields });
  } catch {
    // the machine (and this file) was removed under us: nothing left to record
  }
}


/** Runs the real `smol` binary (dist/, built by the integration global setup) in a scratch SMOL_HOME. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const smolBin = path.join(root, 'bin', 'smol');

export interface CliResult { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }

export interface CliOptions { home: string; input?: string; env?: Record<string, string | undefined>; timeoutMs?: number; cwd?: string }

export function cliEnv(o: CliOptions): NodeJS.ProcessEnv {
  return { ...process.env, SMOL_HOME: o.home, SMOL_ASSETS: sharedHome(), NO_COLOR: '1', ...o.env };
}

/** The kernel and images are built once per test run and shared by every scratch home. */
export function sharedHome(): string {
  return process.env.SMOL_TEST_ASSETS ?? path.join(root, '.smol-test', 'shared');
}

export function smol(args: string[], o: CliOptions): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [smolBin, ...args], { cwd: o.cwd, env: cliEnv(o), stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 90_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() });
    });
    if (o.input !== undefined) child.stdin.end(o.input);
    else child.stdin.end();
  });
}

export function smolSpawn(args: string[], o: CliOptions): ChildProcess {
  return spawn(process.execPath, [smolBin, ...args], { cwd: o.cwd, env: cliEnv(o), stdio: ['pipe', 'pipe', 'pipe'] });
}

export function scratchHome(tag: string): string {
  const base = path.join(os.tmpdir(), 'smol-test');
  fs.mkdirSync(base, { recursive: true });
  return fs.mkdtempSync(path.join(base, `${tag}-`));
}

/** QEMU processes whose command line mentions `needle` (a scratch home): tests assert none survive. */
export function qemuProcessesMentioning(needle: string): number[] {
  const r = spawnSync('pgrep', ['-f', `qemu-system.*${needle}`], { encoding: 'utf8' });
  return r.stdout.split('\n').filter(Boolean).map(Number);
}

export function killQemuMentioning(needle: string): void {
  for (const pid of qemuProcessesMentioning(needle)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  }
}

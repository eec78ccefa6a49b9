/**
 * Real `smol` processes for the rollout integration tests, run from source through tsx so they always
 * match the tree under test. stdout is parsed as JSON lines (worker --json events, gateway --json).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const entry = `import(${JSON.stringify(path.join(root, 'src/cli/main.ts'))}).then(async (m) => { process.exitCode = await m.main(['node', 'smol', ...process.argv.slice(1)]); })`;

export type Json = Record<string, unknown>;

export class Proc {
  readonly child: ChildProcess;
  readonly events: Json[] = [];
  stdout = '';
  stderr = '';
  readonly exited: Promise<number | null>;
  private listeners: (() => void)[] = [];

  /** `prefix` runs the process through another program, e.g. `['ip', 'netns', 'exec', NS]` (which execs it). */
  constructor(args: string[], env: NodeJS.ProcessEnv, prefix: string[] = []) {
    const argv = [...prefix, process.execPath, '--import', 'tsx', '-e', entry, ...args];
    this.child = spawn(argv[0], argv.slice(1), { cwd: root, env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    this.child.stdout!.on('data', (d: Buffer) => {
      this.stdout += d.toString();
      buf += d.toString();
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try { this.events.push(JSON.parse(line) as Json); } catch { /* not an event line */ }
      }
      for (const l of this.listeners) l();
    });
    this.child.stderr!.on('data', (d: Buffer) => { this.stderr += d.toString(); });
    this.exited = new Promise((resolve) => this.child.on('exit', (code, sig) => resolve(code ?? (sig ? 128 : null))));
  }

  /** Resolves with the first event matching `pred` (already seen or future). */
  waitFor(pred: (e: Json) => boolean, timeoutMs = 60_000): Promise<Json> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const hit = this.events.find(pred);
        if (hit) { cleanup(); resolve(hit); }
      };
      const timer = setTimeout(() => { cleanup(); reject(new Error(`timed out waiting for an event; stderr: ${this.stderr.slice(-2000)}`)); }, timeoutMs);
      const cleanup = () => { clearTimeout(timer); this.listeners = this.listeners.filter((l) => l !== check); };
      this.listeners.push(check);
      check();
    });
  }

  kill(sig: NodeJS.Signals): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(sig);
  }
}

export function smol(args: string[], env: NodeJS.ProcessEnv, prefix: string[] = []): Proc {
  return new Proc(args, env, prefix);
}

/** Runs a command to completion; returns exit code, stdout and stderr. */
export async function smolRun(args: string[], env: NodeJS.ProcessEnv, prefix: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = new Proc(args, env, prefix);
  const code = await p.exited;
  return { code, stdout: p.stdout, stderr: p.stderr };
}

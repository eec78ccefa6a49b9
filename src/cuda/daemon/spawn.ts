/** Starts the daemon's session processes, from compiled JS or (in development and tests) from TS source. */
import type { ChildProcess } from 'node:child_process';
import { forkNode } from '../../util/exec.js';

const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

/** A session process (session-process.ts) that accepts its guest on `listenFd`. */
export function spawnSessionProcess(listenFd: number, env: Record<string, string>): ChildProcess {
  const url = new URL(`./session-process${ext}`, import.meta.url);
  // From source, the child needs tsx's loader; compiled, it needs nothing (and not the parent's flags).
  const execArgv = ext === '.ts' ? ['--import', import.meta.resolve('tsx')] : [];
  return forkNode(url, { execArgv, env, fds: [listenFd] });
}

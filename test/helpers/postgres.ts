/**
 * Starts a throwaway PostgreSQL server on loopback in a temp dir for integration tests. PostgreSQL refuses
 * to run as root (CI runs as root), so the server runs as the `postgres` user through runuser.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface PgServer { url: (db?: string) => string; port: number; stop(): void }

/** The directory holding initdb and pg_ctl, or null when PostgreSQL is not installed. */
export function findPgBin(): string | null {
  const base = '/usr/lib/postgresql';
  const versions = fs.existsSync(base) ? fs.readdirSync(base).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const dir = path.join(base, v, 'bin');
    if (fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'pg_ctl'))) return dir;
  }
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'pg_ctl'))) return dir;
  }
  return null;
}

function userId(name: string): { uid: number; gid: number } | null {
  try {
    const uid = Number(execFileSync('id', ['-u', name]).toString().trim());
    const gid = Number(execFileSync('id', ['-g', name]).toString().trim());
    return { uid, gid };
  } catch {
    return null;
  }
}

/** Why the server cannot start here, or null when it can. */
export function pgUnavailableReason(): string | null {
  if (!findPgBin()) return 'PostgreSQL server binaries (initdb, pg_ctl) not installed';
  if (process.getuid?.() === 0 && !userId('postgres')) return 'running as root and no postgres user to run the server as';
  return null;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startPostgres(): Promise<PgServer> {
  const bin = findPgBin();
  if (!bin) throw new Error('PostgreSQL not installed');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-pg-'));
  const asRoot = process.getuid?.() === 0;
  const pgUser = asRoot ? userId('postgres') : null;
  if (asRoot) {
    if (!pgUser) throw new Error('no postgres user');
    fs.chmodSync(dir, 0o700);
    fs.chownSync(dir, pgUser.uid, pgUser.gid);
  }
  const as = (cmd: string, args: string[]) => (asRoot ? execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: 'pipe' }) : execFileSync(cmd, args, { stdio: 'pipe' }));
  const data = path.join(dir, 'data');
  as(path.join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'smol', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  // fsync off: a test server trades durability for speed; the socket lives in the temp dir, not /run
  as(path.join(bin, 'pg_ctl'), ['-D', data, '-l', path.join(dir, 'log'), '-w', '-t', '30', 'start', '-o', `-p ${port} -h 127.0.0.1 -k ${dir} -F -c max_connections=100`]);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    try { as(path.join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']); } catch { /* already gone */ }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stop);
  return { port, url: (db = 'postgres') => `postgres://smol@127.0.0.1:${port}/${db}`, stop };
}

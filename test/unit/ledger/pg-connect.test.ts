/**
 * Opening a PostgreSQL ledger whose server cannot be reached: a transient failure (exit 75) that names
 * the server and comes within the connect timeout, never a hang for the OS's TCP timeout.
 */
import { afterEach, describe, expect, it } from 'vitest';
import net from 'node:net';
import { PostgresLedger } from '../../../src/ledger/postgres.js';
import { ExitCode, LedgerError } from '../../../src/errors/index.js';

const servers: net.Server[] = [];
afterEach(() => { for (const s of servers.splice(0)) s.close(); delete process.env.SMOL_PG_CONNECT_TIMEOUT_MS; });

/** Accepts connections and never says a word, like a server behind a stuck proxy. */
async function silentServer(): Promise<number> {
  const held: net.Socket[] = [];
  const s = net.createServer((c) => { held.push(c); });
  s.on('close', () => held.forEach((c) => c.destroy()));
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as net.AddressInfo).port;
}

async function failure(url: string): Promise<LedgerError> {
  const err = await PostgresLedger.connect({ url }).then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(LedgerError);
  return err as LedgerError;
}

describe('PostgreSQL ledger: an unreachable server', () => {
  it('a server that accepts and never answers fails within the connect timeout, as transient', async () => {
    process.env.SMOL_PG_CONNECT_TIMEOUT_MS = '300';
    const port = await silentServer();
    const t0 = Date.now();
    const err = await failure(`postgres://smol:secret@127.0.0.1:${port}/ledger`);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(err.exitCode).toBe(ExitCode.tempFail);
    expect(err.message).toMatch(/cannot reach PostgreSQL/);
    expect(err.where).toBe(`postgres://smol:***@127.0.0.1:${port}/ledger`);
  });

  it('a refused port is transient too, and the password never reaches the message', async () => {
    const port = await silentServer();
    servers.pop()!.close(); // nothing listens there now
    const err = await failure(`postgres://smol:secret@127.0.0.1:${port}/ledger`);
    expect(err.exitCode).toBe(ExitCode.tempFail);
    expect(JSON.stringify({ m: err.message, d: err.where })).not.toContain('secret');
  });
});

/**
 * The PostgreSQL URL's own TLS options reach `pg` untouched: a real server with ssl=on and a certificate
 * from a private CA (made by openssl), opened through openLedger as every command opens it. With
 * sslmode=verify-full and sslrootcert the ledger opens over TLS; without the CA it refuses the server.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLedger } from '../../../src/ledger/open.js';
import type { PostgresLedger } from '../../../src/ledger/postgres.js';
import { run } from '../../../src/util/exec.js';
import { pgUnavailableReason, startPostgres, type PgServer } from '../../helpers/postgres.js';
import { makeCerts, type TestCerts } from '../../fixtures/tls.js';

const reason = pgUnavailableReason();
let server: PgServer | undefined;
let certs: TestCerts;
let dir: string;

describe.skipIf(reason !== null)(`postgres ledger over TLS${reason ? ` (skipped: ${reason})` : ''}`, () => {
  beforeAll(async () => {
    server = await startPostgres();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-pg-tls-'));
    certs = await makeCerts(dir);
    // the server reads its key as its own user, and insists the key is not readable by others
    fs.chmodSync(dir, 0o755);
    fs.chmodSync(certs.serverKey, 0o600);
    if (process.getuid?.() === 0) {
      const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
      const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
      for (const f of [certs.serverCert, certs.serverKey]) fs.chownSync(f, uid, gid);
    }
    const admin = new pg.Client({ connectionString: server.url() });
    await admin.connect();
    await admin.query(`ALTER SYSTEM SET ssl_cert_file = '${certs.serverCert}'`);
    await admin.query(`ALTER SYSTEM SET ssl_key_file = '${certs.serverKey}'`);
    await admin.query('ALTER SYSTEM SET ssl = on');
    await admin.query('SELECT pg_reload_conf()');
    await admin.end();
    // the reload is signalled, not awaited: new sessions see ssl=on once the postmaster has read it
    for (let i = 0; i < 200; i++) {
      const c = new pg.Client({ connectionString: server.url() });
      await c.connect();
      const on = (await c.query<{ ssl: string }>('SHOW ssl')).rows[0].ssl === 'on';
      await c.end();
      if (on) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the server did not turn ssl on');
  });
  afterAll(() => {
    server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('opens with sslmode=verify-full and sslrootcert, over TLS', async () => {
    for (const host of ['127.0.0.1', 'localhost']) {
      const url = `${server!.url().replace('127.0.0.1', host)}?sslmode=verify-full&sslrootcert=${encodeURIComponent(certs.caCert)}`;
      const l = await openLedger(url, {});
      try {
        const r = await (l.ledger as PostgresLedger).pool.query<{ ssl: boolean; version: string }>('SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
        expect(r.rows[0].ssl).toBe(true);
        expect(r.rows[0].version).toMatch(/^TLSv1\.[23]$/);
      } finally {
        await l.ledger.close();
      }
    }
  });

  it('refuses a server whose certificate it cannot verify, naming why', async () => {
    const err = await openLedger(`${server!.url()}?sslmode=verify-full`, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/opening (the )?ledger failed: .*unable to verify the first certificate/);
    // another CA's root is no better
    const other = await makeCerts(fs.mkdtempSync(path.join(dir, 'other-')));
    const wrong = await openLedger(`${server!.url()}?sslmode=verify-full&sslrootcert=${encodeURIComponent(other.caCert)}`, {}).catch((e: unknown) => e);
    expect((wrong as Error).message).toMatch(/certificate/);
  });
});

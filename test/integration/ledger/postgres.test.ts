import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresLedger } from '../../../src/ledger/postgres.js';
import { pgUnavailableReason, startPostgres, type PgServer } from '../../helpers/postgres.js';
import { ledgerContract, newItem } from '../../unit/ledger/contract.js';

const reason = pgUnavailableReason();
let server: PgServer | undefined;
let admin: pg.Client | undefined;
let n = 0;

describe.skipIf(reason !== null)(`postgres ledger${reason ? ` (skipped: ${reason})` : ''}`, () => {
  beforeAll(async () => {
    server = await startPostgres();
    admin = new pg.Client({ connectionString: server.url() });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    server?.stop();
  });

  ledgerContract('postgres', async () => {
    const db = `t${++n}`;
    await admin!.query(`CREATE DATABASE ${db}`);
    const ledger = await PostgresLedger.connect({ url: server!.url(db) });
    return { ledger, cleanup: async () => { await ledger.close(); await admin!.query(`DROP DATABASE ${db}`); } };
  });

  it('gives each concurrent claimer distinct items (SKIP LOCKED across connections)', async () => {
    await admin!.query('CREATE DATABASE race');
    const url = server!.url('race');
    const ledgers = await Promise.all([1, 2, 3, 4].map(() => PostgresLedger.connect({ url, max: 2 })));
    const L = ledgers[0];
    await L.putManifest('sha256:m', 'x');
    await L.createRollout({ id: 'r', name: 'r', manifestDigest: 'sha256:m', envVersion: 'e', gpus: 1 }, Array.from({ length: 200 }, () => newItem('r')));
    const claimed = await Promise.all(ledgers.map(async (l, w) => {
      const got: number[] = [];
      for (;;) {
        const cs = await l.claim({ worker: `w${w}`, leaseMs: 30_000, limit: 7, kind: 'cpu' });
        if (cs.length === 0) return got;
        for (const c of cs) {
          expect((await l.complete({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o' })).ok).toBe(true);
          got.push(c.item.id);
        }
      }
    }));
    const all = claimed.flat();
    expect(all).toHaveLength(200);
    expect(new Set(all).size).toBe(200);
    expect((await L.results({ rolloutId: 'r' }))).toHaveLength(200);
    expect(await L.check()).toEqual([]);
    await Promise.all(ledgers.map((l) => l.close()));
  });
});

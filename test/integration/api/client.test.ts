/**
 * The TypeScript SDK (src/client, `smol/client`) against a real `smol serve` and real QEMU: one booted machine
 * for the whole file; the other machines the tests make are never started, so they cost no boot.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConflictError, InvalidInputError, NotFoundError, Smol, SmolApiError, SmolConnectionError, UnauthorizedError, type Machine,
} from '../../../src/client/index.js';
import { killQemuMentioning, smol as cli } from '../../helpers/cli.js';
import { startServe, type ServeHandle } from '../../helpers/serve.js';

let srv: ServeHandle;
let smol: Smol;
let m: Machine;

beforeAll(async () => {
  srv = await startServe({ tcp: true });
  smol = new Smol({ socketPath: srv.socket });
  m = await smol.machines.create({ name: 'sdk1', labels: { team: 'a' }, workdir: '/tmp' });
});

afterAll(async () => {
  await smol?.close();
  await srv?.stop();
  if (srv) killQemuMentioning(srv.home);
});

describe('TypeScript SDK', () => {
  it('creates, lists by label and gets a machine, as the CLI sees it', async () => {
    expect(m.state).toBe('running');
    expect((await smol.health()).ok).toBe(true);
    expect((await smol.machines.list({ labels: { team: 'a' } })).map((x) => x.name)).toEqual(['sdk1']);
    expect(await smol.machines.list({ labels: { team: 'b' } })).toEqual([]);
    expect((await smol.machines.get('sdk1')).id).toBe(m.id);
    const ls = await cli(['machine', 'ls', '--json'], { home: srv.home });
    expect((JSON.parse(ls.stdout) as { name: string }[]).map((x) => x.name)).toContain('sdk1');
  });

  it('execs buffered: exit code, both streams, stdin, env and the machine\'s workdir', async () => {
    const r = await m.exec(['sh', '-c', 'cat; echo "$X" >&2; pwd; exit 3'], { stdin: 'in\n', env: { X: 'ex' } });
    expect(r).toMatchObject({ exitCode: 3, stdout: 'in\n/tmp\n', stderr: 'ex\n', timedOut: false, stdoutTruncated: false });
    expect((await m.exec(['sleep', '5'], { timeoutMs: 300 })).timedOut).toBe(true);
  });

  it('streams exec output to callbacks as it comes, a UTF-8 character split across chunks whole', async () => {
    const seen: string[] = [];
    let err = '';
    const script = 'echo one; sleep 0.3; printf "\\303"; sleep 0.3; printf "\\251\\n"; echo two >&2; exit 5';
    const r = await m.exec(['sh', '-c', script], { onStdout: (s) => seen.push(s), onStderr: (s) => { err += s; } });
    expect(seen.length).toBeGreaterThanOrEqual(2); // arrived in pieces, not once at the end
    expect(seen.join('')).toBe('one\né\n');
    expect(err).toBe('two\n');
    expect(r).toMatchObject({ exitCode: 5, stdout: 'one\né\n', stderr: 'two\n', signal: null, timedOut: false });
  });

  it('runs throwaway machines: one POST /v1/run buffered, create + stream + remove with callbacks; none left', async () => {
    const r = await smol.run({ argv: ['sh', '-c', 'cat; echo "$R"; exit 2'], stdin: 'x\n', env: { R: 'run' } });
    expect(r).toMatchObject({ exitCode: 2, stdout: 'x\nrun\n' });
    const seen: string[] = [];
    expect((await smol.run({ argv: ['echo', 'streamed'], onStdout: (t) => seen.push(t) })).stdout).toBe('streamed\n');
    expect(seen.join('')).toBe('streamed\n');
    expect((await smol.machines.list()).map((x) => x.name)).toEqual(['sdk1']);
  });

  it('writes, reads and lists files', async () => {
    // as `machine cp` does, a write makes the parent directories
    expect(await m.files.write('/tmp/sdk/a.txt', 'héllo', { mode: 0o600 })).toEqual({ path: '/tmp/sdk/a.txt', bytes: 6 });
    const bin = Uint8Array.from([0, 255, 10, 13, 128]);
    await m.files.write('/tmp/sdk/b.bin', bin);
    expect(await m.files.read('/tmp/sdk/a.txt')).toBe('héllo');
    expect(Buffer.from(await m.files.read('/tmp/sdk/b.bin', { format: 'bytes' }))).toEqual(Buffer.from(bin));
    const list = await m.files.list('/tmp/sdk');
    expect(list.entries).toEqual([
      { name: 'a.txt', type: 'file', size: 6, mode: '0600' },
      { name: 'b.bin', type: 'file', size: 5, mode: '0644' },
    ]);
    await expect(m.files.read('/tmp/sdk/b.bin', { maxBytes: 4 })).rejects.toThrow(/larger than maxBytes/);
    await expect(m.files.read('/tmp/../etc/passwd')).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('raises the error class of each code, with the CLI\'s exit code and hint', async () => {
    const e = await smol.machines.get('nope').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NotFoundError);
    expect(e).toBeInstanceOf(SmolApiError);
    expect(e).toMatchObject({ status: 404, code: 'not_found', exitCode: 66 });
    expect((e as SmolApiError).hint).toBeTruthy();
    const bad = await smol.machines.create({ name: 'bad', memory: 'lots' }).catch((x: unknown) => x);
    expect(bad).toBeInstanceOf(InvalidInputError);
    expect((bad as SmolApiError).issues.map((i) => i.path)).toContain('memory');
    expect(await smol.machines.create({ name: 'sdk1', start: false }).catch((x: unknown) => x)).toBeInstanceOf(ConflictError);
    // sdk1 was not made forkable (the create body has no such option yet): the fork call is typed and answered
    const fork = await m.fork({ count: 2 }).catch((x: unknown) => x);
    expect(fork, String(fork)).toBeInstanceOf(ConflictError);
    expect(await smol.points.list()).toEqual([]);
    await expect(smol.points.fork('no-such-point')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('makes machines concurrently from several clients, and await using removes one', async () => {
    const clients = [0, 1, 2].map(() => new Smol({ socketPath: srv.socket }));
    try {
      const made = await Promise.all(clients.map((c, i) => c.machines.create({ name: `par${i}`, start: false, labels: { batch: 'p' } })));
      expect(new Set(made.map((x) => x.id)).size).toBe(3);
      expect((await smol.machines.list({ labels: { batch: 'p' } })).map((x) => x.name).sort()).toEqual(['par0', 'par1', 'par2']);
      await Promise.all(made.map((x) => x.remove()));
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    {
      await using tmp = await smol.machines.create({ name: 'scoped', start: false });
      expect(tmp.state).toBe('stopped');
    }
    await expect(smol.machines.get('scoped')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('talks TCP with a token; a wrong token is UnauthorizedError, no server a SmolConnectionError', async () => {
    await using tcp = new Smol({ url: srv.url!, token: srv.token! });
    expect((await tcp.machines.get('sdk1')).id).toBe(m.id);
    await using wrong = new Smol({ url: srv.url!, token: 'not-the-token' });
    const e = await wrong.machines.list().catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UnauthorizedError);
    expect(e).toMatchObject({ status: 401, code: 'unauthorized' });
    await using none = new Smol({ socketPath: `${srv.home}/no.sock` });
    await expect(none.health()).rejects.toBeInstanceOf(SmolConnectionError);
  });

  it('stops and removes the machine', async () => {
    expect((await m.stop()).state).toBe('stopped');
    await expect(m.exec(['true'])).rejects.toBeInstanceOf(ConflictError);
    expect(await m.remove()).toEqual(['sdk1']);
    expect(await smol.machines.list()).toEqual([]);
  });
});

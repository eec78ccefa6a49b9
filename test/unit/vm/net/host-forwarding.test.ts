/** Forwarding on with the first egress machine, back as found after the last (temp files stand in for /proc and /sys). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { enableForwarding, releaseForwarding, type HostNetPaths } from '../../../../src/vm/net/host-forwarding.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-fwd-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function host(name: string, forwarding: string): HostNetPaths & { link: (n: string) => string } {
  const dir = path.join(root, name);
  const netClass = path.join(dir, 'net');
  fs.mkdirSync(path.join(netClass, 'lo'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'ip_forward'), `${forwarding}\n`);
  return {
    sysctl: path.join(dir, 'ip_forward'), saved: path.join(dir, 'run', 'ip_forward.saved'), netClass,
    link: (n: string) => { fs.mkdirSync(path.join(netClass, n)); return n; },
  };
}
const read = (f: string) => fs.readFileSync(f, 'utf8').trim();

describe('host forwarding', () => {
  it('is turned on by the first machine and back off after the last one, not before', () => {
    const h = host('off', '0');
    enableForwarding(h);
    const a = h.link('smolh-aaaa');
    enableForwarding(h); // a second machine: the record stays the first one's
    const b = h.link('smolh-bbbb');
    expect([read(h.sysctl), read(h.saved)]).toEqual(['1', '0']);
    fs.rmdirSync(path.join(h.netClass, a));
    expect(releaseForwarding(h)).toBe(false); // b still runs
    expect(read(h.sysctl)).toBe('1');
    fs.rmdirSync(path.join(h.netClass, b));
    expect(releaseForwarding(h)).toBe(true);
    expect(read(h.sysctl)).toBe('0');
    expect(fs.existsSync(h.saved)).toBe(false);
    expect(releaseForwarding(h)).toBe(true); // idempotent: a second teardown changes nothing
    expect(read(h.sysctl)).toBe('0');
  });

  it('stays on where it was on before smol (a Docker host, a router)', () => {
    const h = host('on', '1');
    enableForwarding(h);
    expect(fs.existsSync(h.saved)).toBe(false);
    expect(releaseForwarding(h)).toBe(true);
    expect(read(h.sysctl)).toBe('1');
  });
});

/**
 * The host-wide part of egress, shared by every egress machine of every smol home on the host: IPv4
 * forwarding and the `inet smol` table (rules.ts). The first machine turns forwarding on and records the
 * value it found, in /run (cleared by a reboot, as the setting is); the teardown that finds no machine veth
 * left puts that value back, and its caller drops the table. A host where forwarding was already on (Docker,
 * a router) keeps it on. Two smols racing, one tearing down its last machine while the other starts one,
 * can at worst leave forwarding on without a record: what every run left before.
 */
import fs from 'node:fs';
import path from 'node:path';
import { HOST_IF_PREFIX } from './rules.js';

export interface HostNetPaths { sysctl: string; saved: string; netClass: string }
export const HOST_NET: HostNetPaths = { sysctl: '/proc/sys/net/ipv4/ip_forward', saved: '/run/smol/ip_forward.saved', netClass: '/sys/class/net' };

export function enableForwarding(p: HostNetPaths = HOST_NET): void {
  const was = fs.readFileSync(p.sysctl, 'utf8').trim();
  if (was === '1') return;
  fs.mkdirSync(path.dirname(p.saved), { recursive: true });
  try {
    fs.writeFileSync(p.saved, `${was}\n`, { flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // another machine's start recorded it first
  }
  fs.writeFileSync(p.sysctl, '1');
}

/** After a machine's veth is gone: true when no machine's is left, forwarding then set back as it was found. */
export function releaseForwarding(p: HostNetPaths = HOST_NET): boolean {
  if (fs.readdirSync(p.netClass).some((n) => n.startsWith(HOST_IF_PREFIX))) return false;
  let was: string;
  try {
    was = fs.readFileSync(p.saved, 'utf8').trim();
  } catch {
    return true; // found on, or already put back
  }
  if (was === '0') fs.writeFileSync(p.sysctl, '0');
  fs.rmSync(p.saved, { force: true });
  return true;
}

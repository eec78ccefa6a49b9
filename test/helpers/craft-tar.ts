/**
 * Tar streams as a hostile guest would write them: raw headers (node-tar's Header) with any path, type,
 * mode, owner or link target, so tests can feed the host exactly the entries an honest tar never makes.
 */
import { Header, Pax, type HeaderData } from 'tar';

export interface TarMember {
  path: string;
  type?: HeaderData['type'];
  data?: Buffer | string;
  mode?: number;
  linkpath?: string;
  uid?: number;
  gid?: number;
  devmaj?: number;
  devmin?: number;
}

/** A tar stream of `members`; `end: false` leaves off the two zero blocks, as a stream cut short would. */
export function craftTar(members: TarMember[], o: { end?: boolean } = {}): Buffer {
  const parts: Buffer[] = [];
  for (const m of members) {
    const data = typeof m.data === 'string' ? Buffer.from(m.data) : (m.data ?? Buffer.alloc(0));
    const type = m.type ?? 'File';
    const h = new Header({
      path: m.path, type, size: type === 'File' ? data.length : 0, mode: m.mode ?? (type === 'Directory' ? 0o755 : 0o644),
      mtime: new Date(1_700_000_000_000), linkpath: m.linkpath, uid: m.uid ?? 0, gid: m.gid ?? 0, devmaj: m.devmaj ?? 0, devmin: m.devmin ?? 0,
    });
    // names past ustar's fields go in a pax header first, as GNU and busybox tar write them
    if (h.encode()) parts.push(new Pax({ path: m.path, linkpath: m.linkpath }).encode());
    parts.push(h.block!);
    if (type === 'File' && data.length) parts.push(data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  if (o.end !== false) parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

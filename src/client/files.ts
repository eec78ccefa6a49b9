/**
 * Files in a running machine (`m.files`): one file read or written, a directory listed, a directory out or in
 * as a tar. Downloads are read with a cap (maxBytes), so a guest that grew a huge file cannot fill this process.
 */
import { apiError, SmolProtocolError } from './errors.js';
import type { components } from './schema.js';
import { must, type Transport } from './transport.js';

export type DirEntry = components['schemas']['DirEntry'];
export type DirListing = components['schemas']['DirListing'];
export type TarUploaded = components['schemas']['TarUploaded'];

/** The server's own default cap on a file (SMOL_API_MAX_UPLOAD); a larger one needs both raised. */
export const DEFAULT_MAX_READ = 1024 * 1024 * 1024;

export interface ReadOptions { maxBytes?: number; signal?: AbortSignal }

// the bytes go as they are, not through JSON.stringify
const raw = { bodySerializer: (b: unknown) => b, headers: { 'content-type': 'application/octet-stream' } };
const bytesOf = (d: string | Uint8Array) => (typeof d === 'string' ? new TextEncoder().encode(d) : d);

export class Files {
  constructor(private readonly t: Transport, private readonly machine: () => string) {}

  /** The file's text (UTF-8). */
  read(path: string, o?: ReadOptions & { format?: 'text' }): Promise<string>;
  /** The file's bytes. */
  read(path: string, o: ReadOptions & { format: 'bytes' }): Promise<Uint8Array>;
  async read(path: string, o: ReadOptions & { format?: 'text' | 'bytes' } = {}): Promise<string | Uint8Array> {
    const { data, error, response } = await this.t.api.GET('/v1/machines/{name}/files', { params: { path: { name: this.machine() }, query: { path } }, parseAs: 'stream', signal: o.signal });
    if (!response.ok) throw apiError(response.status, error);
    const b = await readCapped(data, o.maxBytes ?? DEFAULT_MAX_READ, `file ${path}`);
    return o.format === 'bytes' ? b : new TextDecoder().decode(b);
  }

  /** Writes (replaces) one file, with `mode` (default 0o644); missing parent directories are made. */
  async write(path: string, data: string | Uint8Array, o: { mode?: number } = {}): Promise<{ path: string; bytes: number }> {
    const query = { path, ...(o.mode === undefined ? {} : { mode: o.mode.toString(8).padStart(4, '0') }) };
    return must(this.t.api.PUT('/v1/machines/{name}/files', { params: { path: { name: this.machine() }, query }, body: bytesOf(data), ...raw }));
  }

  /** The directory's entries (name, type, size, mode); `truncated` past the server's 10,000. */
  list(path: string): Promise<DirListing> {
    return must(this.t.api.GET('/v1/machines/{name}/files/list', { params: { path: { name: this.machine() }, query: { path } } }));
  }

  /** The directory as a tar (modes kept). */
  async readTar(path: string, o: ReadOptions = {}): Promise<Uint8Array> {
    const { data, error, response } = await this.t.api.GET('/v1/machines/{name}/files/tar', { params: { path: { name: this.machine() }, query: { path } }, parseAs: 'stream', signal: o.signal });
    if (!response.ok) throw apiError(response.status, error);
    return readCapped(data, o.maxBytes ?? DEFAULT_MAX_READ, `tar of ${path}`);
  }

  /** Unpacks a tar into the directory (made if missing); entries that would leave it are refused, nothing landing. */
  writeTar(path: string, tar: Uint8Array): Promise<TarUploaded> {
    return must(this.t.api.PUT('/v1/machines/{name}/files/tar', { params: { path: { name: this.machine() }, query: { path } }, body: tar, ...raw }));
  }
}

async function readCapped(body: ReadableStream<Uint8Array> | null | undefined, cap: number, what: string): Promise<Uint8Array> {
  if (!body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > cap) throw new SmolProtocolError(`${what} is larger than maxBytes (${cap} bytes); pass a larger maxBytes to read it`);
      chunks.push(value);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks);
}

/** CUDA channel endpoints, as written in `--listen` and SMOL_CUDA_ENDPOINT. */
export type Endpoint =
  | { kind: 'unix'; path: string }
  | { kind: 'tcp'; host: string; port: number }
  | { kind: 'vsock'; cid: number; port: number };

/** unix:PATH | tcp:HOST:PORT | vsock:PORT (listen: any CID) | vsock:CID:PORT; null when malformed. */
export function parseEndpoint(s: string): Endpoint | null {
  const i = s.indexOf(':');
  if (i < 0) return null;
  const kind = s.slice(0, i), rest = s.slice(i + 1);
  const port = (p: string) => (/^\d+$/.test(p) && Number(p) > 0 && Number(p) < 2 ** 32 ? Number(p) : NaN);
  if (kind === 'unix' && rest.length > 0) return { kind, path: rest };
  if (kind === 'tcp') {
    const j = rest.lastIndexOf(':');
    const p = port(rest.slice(j + 1));
    if (j <= 0 || Number.isNaN(p) || p > 65535) return null;
    return { kind, host: rest.slice(0, j), port: p };
  }
  if (kind === 'vsock') {
    const parts = rest.split(':');
    const nums = parts.map(port);
    if (parts.length === 1 && !Number.isNaN(nums[0])) return { kind, cid: 0xffffffff, port: nums[0] };
    if (parts.length === 2 && nums.every((n) => !Number.isNaN(n))) return { kind, cid: nums[0], port: nums[1] };
  }
  return null;
}

export function formatEndpoint(ep: Endpoint): string {
  if (ep.kind === 'unix') return `unix:${ep.path}`;
  if (ep.kind === 'tcp') return `tcp:${ep.host}:${ep.port}`;
  return ep.cid === 0xffffffff ? `vsock:${ep.port}` : `vsock:${ep.cid}:${ep.port}`;
}

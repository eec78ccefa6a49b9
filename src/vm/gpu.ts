/**
 * `gpu: true` machines: the guest's CUDA/NVML shims reach a host GPU daemon through the agent. Each guest
 * agent forwards /run/smol/cuda-<port>.sock as CONNECT("cuda") streams to the host process on that port,
 * so whichever smol process started a command relays that command's CUDA calls — no extra daemon process,
 * and a machine needs no vsock. The daemon runs in this process (each session in a process of its own).
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { GpuError } from '../errors/index.js';
import { startGpuDaemon, type GpuDaemon } from '../cuda/daemon/index.js';
import { buildPaths } from '../util/paths.js';
import type { GuestChannel } from './engine.js';
import { runRoot } from './layout.js';

export const GUEST_CUDA_LIB_DIR = '/run/smol/lib';

export interface GpuAttachment {
  /** Environment for guest commands that should use the GPU. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export interface GpuOptions { home: string; libcuda?: string; quotaBytes?: number }

const shims = () => ['libcuda.so.1', 'libnvidia-ml.so.1'].map((f) => path.join(buildPaths.root, f));

export async function attachGpu(ch: GuestChannel, o: GpuOptions): Promise<GpuAttachment> {
  for (const f of shims()) {
    if (!fs.existsSync(f)) throw new GpuError(`the guest CUDA shim ${path.basename(f)} is not built`, { hint: 'Build it with: npm run build' });
  }
  const dir = runRoot(o.home);
  fs.mkdirSync(dir, { recursive: true });
  const sock = path.join(dir, `gpu-${process.pid}-${ch.port}.sock`);
  fs.rmSync(sock, { force: true });
  const daemon: GpuDaemon = await startGpuDaemon({ listen: `unix:${sock}`, libcuda: o.libcuda ?? process.env.SMOL_LIBCUDA, quotaBytes: o.quotaBytes });
  try {
    for (const f of shims()) await ch.putFile(fs.createReadStream(f), `${GUEST_CUDA_LIB_DIR}/${path.basename(f)}`, 0o755);
  } catch (err) {
    await daemon.close();
    throw err;
  }
  const relays = new Set<net.Socket>();
  ch.onStream('cuda', (guest: Duplex) => {
    const host = net.createConnection(sock);
    relays.add(host);
    const end = () => { guest.destroy(); host.destroy(); relays.delete(host); };
    host.on('error', end).on('close', end);
    guest.on('error', end).on('close', end);
    guest.pipe(host).pipe(guest);
  });
  return {
    env: { LD_LIBRARY_PATH: GUEST_CUDA_LIB_DIR, SMOL_CUDA_ENDPOINT: `unix:/run/smol/cuda-${ch.port}.sock` },
    async close() {
      for (const s of relays) s.destroy();
      await daemon.close();
      fs.rmSync(sock, { force: true });
    },
  };
}

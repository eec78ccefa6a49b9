/**
 * A real S3-compatible server for tests: s3rver (npm), in this process on loopback, storing under a temp
 * directory. Debian ships no S3 server that runs alone (DESIGN.md §10), so this is what the S3 blob store is
 * tested against; AWS S3 itself, MinIO and R2 are not (docs/ledger.md says so).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

interface S3rverInstance { run(): Promise<{ port: number }>; close(): Promise<void> }
type S3rverClass = new (o: { port: number; address: string; silent: boolean; directory: string; configureBuckets: { name: string }[] }) => S3rverInstance;
const S3rver = createRequire(import.meta.url)('s3rver') as S3rverClass;

export interface S3Server {
  endpoint: string;
  /** The environment a smol process needs to reach it (endpoint, region, s3rver's fixed credentials, path style). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startS3(buckets: string[]): Promise<S3Server> {
  // as s3-client.ts does for smol's own clients: the SDK's Node 22 notice is noise on the Node 20 smol pins
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-s3rver-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: buckets.map((name) => ({ name })) });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    env: { AWS_ENDPOINT_URL: endpoint, AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', SMOL_S3_FORCE_PATH_STYLE: '1' },
    async stop() {
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts the daemon's worker threads, from compiled JS or (in development and tests) from TS source. */
import { Worker } from 'node:worker_threads';

const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

/** Worker threads do not inherit tsx's loader, so from source they register it first. */
export function spawnWorker(name: string, workerData: unknown): Worker {
  const url = new URL(`./${name}${ext}`, import.meta.url);
  if (ext === '.js') return new Worker(url, { workerData });
  const api = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(url.href)}); })`;
  return new Worker(code, { eval: true, workerData });
}

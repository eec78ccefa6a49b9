/** One ora line per layer on an interactive stderr; nothing otherwise (or with --json). */
import type { Ora } from 'ora';
import type { LayerEvent } from '../../../vm/image/pull.js';
import { formatBytes } from '../../output.js';

export interface LayerProgress { onLayer?: (e: LayerEvent) => void; stop(): void }

export async function layerProgress(quiet: boolean): Promise<LayerProgress> {
  if (quiet || !process.stderr.isTTY) return { stop: () => undefined };
  const ora = (await import('ora')).default;
  let current: Ora | undefined;
  let last = 0;
  const label = (e: LayerEvent) => `layer ${e.index + 1}/${e.count} ${e.digest.slice(7, 19)}`;
  return {
    onLayer: (e) => {
      if (e.state === 'cached') { ora({ stream: process.stderr, discardStdin: false }).succeed(`${label(e)} ${formatBytes(e.size)} (cached)`); return; }
      if (e.state === 'done') { current?.succeed(`${label(e)} ${formatBytes(e.size)}`); current = undefined; return; }
      current ??= ora({ stream: process.stderr, text: label(e), discardStdin: false }).start();
      if (Date.now() - last > 100) { last = Date.now(); current.text = `${label(e)} ${formatBytes(e.bytes)} / ${formatBytes(e.size)}`; }
    },
    stop: () => { current?.fail(); current = undefined; },
  };
}

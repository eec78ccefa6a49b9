/**
 * One line per layer on an interactive stderr (layers download a few at a time: one spinner shows those in
 * flight, each finished layer gets its own ✔ line); nothing otherwise (or with --json).
 */
import type { Ora } from 'ora';
import type { LayerEvent } from '../../../vm/api/images.js';
import { formatBytes } from '../../output.js';
import { spinnerTerminal } from '../../color.js';

export interface LayerProgress { onLayer?: (e: LayerEvent) => void; stop(): void }

export async function layerProgress(quiet: boolean): Promise<LayerProgress> {
  if (quiet || !spinnerTerminal()) return { stop: () => undefined };
  const ora = (await import('ora')).default;
  const spinner: Ora = ora({ stream: process.stderr, discardStdin: false });
  const inFlight = new Map<number, LayerEvent>();
  let last = 0;
  const label = (e: LayerEvent) => `layer ${e.index + 1}/${e.count} ${e.digest.slice(7, 19)}`;
  const render = () => {
    spinner.text = [...inFlight.values()].map((e) => `${label(e)} ${formatBytes(e.bytes)} / ${formatBytes(e.size)}`).join(' · ');
    if (inFlight.size && !spinner.isSpinning) spinner.start();
  };
  const persist = (text: string) => {
    const spinning = spinner.isSpinning;
    spinner.stop();
    ora({ stream: process.stderr, discardStdin: false }).succeed(text);
    if (spinning && inFlight.size) render();
  };
  return {
    onLayer: (e) => {
      if (e.state === 'cached') return persist(`${label(e)} ${formatBytes(e.size)} (cached)`);
      if (e.state === 'done') { inFlight.delete(e.index); persist(`${label(e)} ${formatBytes(e.size)}`); return render(); }
      inFlight.set(e.index, e);
      if (e.bytes === 0 || Date.now() - last > 100) { last = Date.now(); render(); }
    },
    stop: () => { if (inFlight.size) spinner.fail(); else spinner.stop(); inFlight.clear(); },
  };
}

/** What command handlers receive: the services, built lazily so `smol --help` opens nothing. */
import type { Ora } from 'ora';
import { createQemuEngine, MachineService, MachineStore, openMachineDb } from '../vm/api/machines.js';
import type { MachineSource } from '../artifact/index.js';
import fs from 'node:fs';
import path from 'node:path';
import { dataPaths, smolHome } from '../util/paths.js';
import { spinnerTerminal } from './color.js';

let service: MachineService | undefined;

/** How `smol pack create --from-vm/--image/-s` reads machines; the artifact code loads only here. */
export async function machineSource(): Promise<MachineSource> {
  const [{ machinePackSource }, { setMachineSource, getMachineSource }] = await Promise.all([import('../vm/api/pack.js'), import('../artifact/index.js')]);
  setMachineSource(machinePackSource(() => machineService()));
  return getMachineSource();
}

export function machineService(): MachineService {
  if (!service) {
    const home = smolHome();
    service = new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home, { notice: (line) => noticeOnce(home, line) }) });
  }
  return service;
}

export interface ProgressReporter { update(msg: string): void; done(msg?: string): void; fail(): void }

/** A spinner on an interactive stderr; quiet otherwise (or one line per step with SMOL_VERBOSE=1). */
export function progress(quiet = false): ProgressReporter {
  if (!quiet && spinnerTerminal()) {
    // ora loads only on a terminal, in the background: the spinner appears once it has, showing the latest step
    let spinner: Ora | undefined;
    let text: string | undefined;
    let finished = false;
    let make: ((msg: string) => Ora) | undefined;
    void import('ora').then((m) => {
      // discardStdin off: ora would put stdin in raw mode and back to cooked when it stops, undoing the raw
      // mode of an -it session that was set before the spinner (guest input then echoed twice)
      make = (msg) => m.default({ stream: process.stderr, text: msg, discardStdin: false }).start();
      if (text !== undefined && !finished) spinner = make(text);
    });
    return {
      update: (msg) => { text = msg; finished = false; if (spinner) spinner.text = msg; else if (make) spinner = make(msg); },
      done: (msg) => {
        finished = true;
        if (msg && spinner) spinner.succeed(msg); else if (msg) process.stderr.write(`${msg}\n`); else spinner?.stop();
        spinner = undefined;
      },
      fail: () => { finished = true; spinner?.stop(); spinner = undefined; },
    };
  }
  const verbose = !quiet && process.env.SMOL_VERBOSE === '1';
  return {
    update: (msg) => { if (verbose) process.stderr.write(`smol: ${msg}\n`); },
    done: (msg) => { if (verbose && msg) process.stderr.write(`smol: ${msg}\n`); },
    fail: () => undefined,
  };
}

/** Notices such as "using TCG" are said once per data dir, not on every command. */
function noticeOnce(home: string, line: string): void {
  const marker = path.join(home, `.noticed-${line.split(/[\s:(]/)[0].toLowerCase()}`);
  if (fs.existsSync(marker)) return;
  process.stderr.write(`smol: ${line}\n`);
  try {
    fs.mkdirSync(home, { recursive: true });
    fs.writeFileSync(marker, `${line}\n`);
  } catch {
    // not being able to remember a notice is harmless
  }
}

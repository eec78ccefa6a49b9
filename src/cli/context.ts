/** What command handlers receive: the services, built lazily so `smol --help` opens nothing. */
import ora, { type Ora } from 'ora';
import { openRegistry } from '../vm/registry/db.js';
import { MachineStore } from '../vm/registry/machines.js';
import { MachineService } from '../vm/service.js';
import { createQemuEngine } from '../vm/qemu-engine.js';
import { machinePackSource } from '../vm/pack-source.js';
import { setMachineSource } from '../artifact/index.js';
import fs from 'node:fs';
import path from 'node:path';
import { dataPaths, smolHome } from '../util/paths.js';

let service: MachineService | undefined;

// `smol pack create --from-vm/--image/-s` reads machines through this
setMachineSource(machinePackSource(() => machineService()));

export function machineService(): MachineService {
  if (!service) {
    const home = smolHome();
    service = new MachineService({ home, store: new MachineStore(openRegistry(dataPaths(home).registry)), engine: createQemuEngine(home, { notice: (line) => noticeOnce(home, line) }) });
  }
  return service;
}

export interface ProgressReporter { update(msg: string): void; done(msg?: string): void; fail(): void }

/** A spinner on an interactive stderr; quiet otherwise (or one line per step with SMOL_VERBOSE=1). */
export function progress(quiet = false): ProgressReporter {
  if (!quiet && process.stderr.isTTY) {
    let spinner: Ora | undefined;
    return {
      update: (msg) => { spinner ??= ora({ stream: process.stderr }).start(); spinner.text = msg; },
      done: (msg) => { if (msg) spinner?.succeed(msg); else spinner?.stop(); spinner = undefined; },
      fail: () => { spinner?.stop(); spinner = undefined; },
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

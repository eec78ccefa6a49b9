/**
 * The state homes whose machines sit on one assets dir's images. Several homes can share $SMOL_ASSETS (tests
 * and CI jobs do, and so can users), and a machine's disk is an overlay on a base under assets/images/: an
 * `image rm` or `prune` run from one home must not take a base from under another home's machine.
 *
 * A home that keeps a machine disk on a shared assets dir leaves its path in assets/homes/ (one file per
 * home). Another home's machines are found by their disks, not by its registry: every qcow2 file under its
 * machines/ whose backing file is a base here marks that base as used, whatever version of smol made it, and
 * a fork's chain is covered because its lowest overlay names the base.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { dataPaths } from '../../util/paths.js';
import { readQcow2Header } from './qcow2.js';
import { storePaths } from './store.js';

const homesDir = (assets: string) => path.join(assets, 'homes');
const entryOf = (assets: string, home: string) => path.join(homesDir(assets), crypto.createHash('sha256').update(path.resolve(home)).digest('hex').slice(0, 16));

/** Records that home keeps machine disks on assets; a no-op for a home that is its own assets dir. */
export function registerHome(assets: string, home: string): void {
  if (path.resolve(assets) === path.resolve(home)) return;
  const entry = entryOf(assets, home);
  try {
    if (fs.existsSync(entry)) return;
    fs.mkdirSync(homesDir(assets), { recursive: true });
    fs.writeFileSync(entry, `${path.resolve(home)}\n`);
  } catch {
    // a read-only assets dir still serves its bases; nobody can prune it either
  }
}

/** The other homes registered on assets; a home whose machines dir has gone is forgotten. */
export function otherHomes(assets: string, home: string): string[] {
  const self = path.resolve(home);
  const out: string[] = [];
  let names: string[] = [];
  try {
    names = fs.readdirSync(homesDir(assets));
  } catch {
    return out;
  }
  for (const n of names) {
    const entry = path.join(homesDir(assets), n);
    let other: string;
    try {
      other = fs.readFileSync(entry, 'utf8').trim();
    } catch {
      continue;
    }
    if (!other || other === self) continue;
    if (!fs.existsSync(dataPaths(other).machines)) {
      fs.rmSync(entry, { force: true });
      continue;
    }
    out.push(other);
  }
  return out;
}

/** image id → the machines of other homes whose disks sit on it, each as `ID (of HOME)`. */
export function machinesOfOtherHomes(assets: string, home: string): Map<string, string[]> {
  // real paths on both sides: one home may name the shared dir through a symlink, another not
  const images = real(storePaths(assets).images) + path.sep;
  const map = new Map<string, string[]>();
  for (const other of otherHomes(assets, home)) {
    const root = dataPaths(other).machines;
    for (const id of safeList(root)) {
      for (const f of safeList(path.join(root, id)).filter((n) => n.endsWith('.qcow2'))) {
        const backing = backingOf(path.join(root, id, f));
        if (!backing?.startsWith(images)) continue;
        const image = backing.slice(images.length).split(path.sep)[0];
        const who = `${id} (of ${other})`;
        if (!map.get(image)?.includes(who)) map.set(image, [...(map.get(image) ?? []), who]);
      }
    }
  }
  return map;
}

function backingOf(file: string): string | null {
  try {
    const b = readQcow2Header(file).backing;
    return b ? real(path.resolve(path.dirname(file), b)) : null;
  } catch {
    return null; // not a qcow2 (a half-written copy), or gone meanwhile
  }
}

function real(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p); // gone: then nothing of it is in use
  }
}

function safeList(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

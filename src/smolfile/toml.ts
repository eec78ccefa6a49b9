/**
 * smolvm's Smolfile (TOML) read as a smol Smolfile: each key smolvm documents is mapped to the YAML schema's
 * form, and every key that has no smol equivalent is named (with its line), never dropped: the strict
 * schema rule holds for both formats. docs/smolfile-toml.md lists the mapping.
 */
import { createRequire } from 'node:module';
import { ValidationError, type Issue } from '../errors/index.js';

// loaded only when a TOML Smolfile is read: `smol run` without -s never pays for it
const toml = () => createRequire(import.meta.url)('smol-toml') as typeof import('smol-toml');

/** What a user would have written in YAML: the schema validates it afterwards like any Smolfile. */
export type YamlShape = Record<string, unknown>;

/** smolvm keys smol deliberately does not map, and why (the message the user sees). */
const UNMAPPABLE: Record<string, string> = {
  user: 'smol runs guest commands as root; run them as another user with su or setpriv in the command',
  storage: 'smol has no separate storage disk; size the root disk with "disk" (smolvm\'s "overlay" maps to it)',
  gpu_vram: 'smol\'s GPU support forwards CUDA to the host, it has no virtio-gpu VRAM to size',
  artifact: 'smol has no pack profile; pass resources to `smol pack create` or `smol pack run` as flags',
  pack: 'smol has no pack profile; pass resources to `smol pack create` or `smol pack run` as flags',
  health: 'smol has no health checks',
  restart: 'smol has no restart policy',
  auth: 'smol does not forward the SSH agent',
  service: 'smol has no service metadata; publish the port with "ports"',
};

/** The keys of smolvm's [dev] profile, which smol applies (smol runs locally, as that profile is meant for). */
const DEV_KEYS = new Set(['volumes', 'env', 'init', 'workdir', 'ports']);

export function parseSmolvmToml(text: string, file = 'Smolfile.toml'): YamlShape {
  let raw: Record<string, unknown>;
  try {
    raw = toml().parse(text) as Record<string, unknown>;
  } catch (err) {
    if (!(err instanceof toml().TomlError)) throw err;
    throw new ValidationError(`${file} is not valid TOML: ${err.message.split('\n')[0]}`, [], { where: `${file}:${err.line}` });
  }
  const issues: Issue[] = [];
  const at = (table: string | null, key: string) => `${file}:${lineOf(text, table, key) ?? '?'} ${table ? `${table}.` : ''}${key}`;
  const problem = (table: string | null, key: string, message: string) => issues.push({ path: at(table, key), message });
  const strings = (table: string | null, key: string, v: unknown): string[] => {
    if (Array.isArray(v) && v.every((s) => typeof s === 'string')) return v;
    problem(table, key, 'must be a list of strings');
    return [];
  };
  const out: YamlShape = {};
  const env: Record<string, string> = {};
  const ports: string[] = [];
  const volumes: { host: string; guest: string; readonly: boolean }[] = [];
  const init: string[] = [];
  const allow: string[] = [];
  const command: string[] = [];
  const lists = (table: string | null, key: string, v: unknown) => {
    const list = strings(table, key, v);
    if (key === 'env') {
      for (const e of list) {
        const i = e.indexOf('=');
        if (i < 1) problem(table, key, `"${e}" is not KEY=VALUE`);
        else env[e.slice(0, i)] = e.slice(i + 1);
      }
    } else if (key === 'ports') ports.push(...list);
    else if (key === 'init') init.push(...list);
    else if (key === 'volumes') {
      for (const s of list) {
        const vol = volumeOf(s);
        if (typeof vol === 'string') problem(table, key, vol);
        else volumes.push(vol);
      }
    }
  };

  for (const [key, v] of Object.entries(raw)) {
    if (key in UNMAPPABLE) {
      problem(null, key, `cannot be mapped: ${UNMAPPABLE[key]}`);
      continue;
    }
    switch (key) {
      case 'image':
      case 'workdir':
        if (typeof v === 'string') out[key] = v;
        else problem(null, key, 'must be a string');
        break;
      case 'cpus':
      case 'memory':
        out[key] = v; // the schema checks range and type, naming the key
        break;
      case 'net':
        out.net = v;
        break;
      case 'gpu':
        if (v === true) problem(null, key, 'cannot be mapped: smolvm\'s gpu is Vulkan over virtio-gpu; smol\'s "gpu" forwards CUDA to the host (docs/cuda.md), a different thing to ask for');
        else if (v !== false) problem(null, key, 'must be true or false');
        break;
      case 'overlay':
        if (typeof v === 'number' && Number.isInteger(v) && v > 0) out.disk = `${v}G`;
        else problem(null, key, 'must be a whole number of GiB');
        break;
      case 'entrypoint':
      case 'cmd':
        // entrypoint then cmd, whatever order the file has them in
        if (key === 'entrypoint') command.unshift(...strings(null, key, v));
        else command.push(...strings(null, key, v));
        break;
      case 'env':
      case 'ports':
      case 'volumes':
      case 'init':
        lists(null, key, v);
        break;
      case 'resources':
        for (const [k, rv] of tableEntries(v, 'resources', problem)) {
          if (k === 'cpus' || k === 'memory') out[k] = rv;
          else problem('resources', k, 'unknown key: smolvm\'s [resources] holds cpus and memory');
        }
        break;
      case 'dev':
        for (const [k, dv] of tableEntries(v, 'dev', problem)) {
          if (!DEV_KEYS.has(k)) problem('dev', k, `unknown key: smolvm's [dev] holds ${[...DEV_KEYS].join(', ')}`);
          else if (k === 'workdir') {
            if (typeof dv === 'string') out.workdir = dv;
            else problem('dev', k, 'must be a string');
          } else lists('dev', k, dv);
        }
        break;
      case 'network':
        for (const [k, nv] of tableEntries(v, 'network', problem)) {
          if (k === 'allow_hosts' || k === 'allow_cidrs') allow.push(...strings('network', k, nv));
          else problem('network', k, 'unknown key: smolvm\'s [network] holds allow_hosts and allow_cidrs');
        }
        break;
      default:
        problem(null, key, 'unknown key (neither smolvm nor smol has it); see docs/smolfile-toml.md for the keys read');
    }
  }
  if (issues.length) {
    throw new ValidationError(`${file}: ${issues.length} key${issues.length > 1 ? 's' : ''} smol cannot map`, issues, {
      where: file, hint: 'Remove or rewrite those keys (docs/smolfile-toml.md says what each maps to), or write a YAML Smolfile (see Smolfile.example).',
    });
  }
  if (command.length) out.command = command;
  if (Object.keys(env).length) out.env = env;
  if (ports.length) out.ports = ports;
  if (volumes.length) out.volumes = volumes;
  if (init.length) out.init = init;
  if (allow.length) out.network = { allow };
  return out;
}

function tableEntries(v: unknown, table: string, problem: (t: string | null, k: string, m: string) => void): [string, unknown][] {
  if (v && typeof v === 'object' && !Array.isArray(v)) return Object.entries(v);
  problem(null, table, 'must be a table');
  return [];
}

/** smolvm's "HOST:GUEST[:ro]" (also ":rw"). */
function volumeOf(s: string): { host: string; guest: string; readonly: boolean } | string {
  const parts = s.split(':');
  const mode = parts.length === 3 ? parts[2] : undefined;
  if (parts.length < 2 || parts.length > 3 || !parts[0] || !parts[1] || (mode !== undefined && mode !== 'ro' && mode !== 'rw')) {
    return `"${s}" is not HOST:GUEST[:ro]`;
  }
  return { host: parts[0], guest: parts[1], readonly: mode === 'ro' };
}

/** The line of `key` in `[table]` (or before any table), 1-based; TOML parsers keep no positions. */
function lineOf(text: string, table: string | null, key: string): number | undefined {
  let current: string | null = null;
  const lines = text.split('\n');
  for (const [i, l] of lines.entries()) {
    const header = /^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]/.exec(l);
    if (header) {
      current = header[1];
      if (table === null && current === key) return i + 1;
      continue;
    }
    if (current === table && new RegExp(`^\\s*"?${key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"?\\s*=`).test(l)) return i + 1;
  }
  return undefined;
}

/**
 * Whether a Smolfile's text is TOML: a .toml name says so; otherwise a file that is not a YAML mapping but
 * parses as a TOML table (`cpus = 2` is a YAML string, never a mapping).
 */
export function isTomlSmolfile(file: string, text: string, yamlIsMapping: () => boolean): boolean {
  if (/\.toml$/i.test(file)) return true;
  if (/\.ya?ml$/i.test(file) || !text.trim() || yamlIsMapping()) return false;
  try {
    toml().parse(text);
    return true;
  } catch {
    return false;
  }
}

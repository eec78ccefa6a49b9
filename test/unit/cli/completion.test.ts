import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../../src/cli/main.js';
import { bashCompletion, completionTree, fishCompletion, zshCompletion, type CompletionNode } from '../../../src/cli/completion.js';

let nodes: CompletionNode[];
let script: string;
beforeAll(async () => {
  nodes = completionTree(await buildProgram());
  script = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'smol-compl-')), 'smol.bash');
  fs.writeFileSync(script, bashCompletion(nodes));
});

/** Source the script in a real bash and call its function with COMP_WORDS, as bash does on TAB. */
function complete(line: string): string[] {
  const words = line.split(' ');
  const arr = words.map((w) => `'${w}'`).join(' ');
  const r = spawnSync('bash', ['--noprofile', '--norc', '-c', `source '${script}'; COMP_WORDS=(${arr}); COMP_CWORD=${words.length - 1}; _smol; printf '%s\\n' "\${COMPREPLY[@]}"`], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  return r.stdout.split('\n').filter(Boolean);
}

describe('smol completion bash (sourced in bash, called with COMP_WORDS)', () => {
  it('completes top-level commands and nested subcommands', () => {
    expect(complete('smol ma')).toEqual(['machine']);
    expect(complete('smol machine ex')).toEqual(['exec']);
    expect(complete('smol machine s')).toEqual(expect.arrayContaining(['start', 'stop', 'status', 'shell', 'sh']));
    expect(complete('smol co')).toEqual(['completion']);
  });

  it('completes the options of the command typed, through aliases', () => {
    expect(complete('smol m exec --st')).toEqual(['--stream']);
    expect(complete('smol pack run --m')).toEqual(['--mem']);
    expect(complete('smol run --de')).toEqual(['--detach']);
    expect(complete('smol run --')).not.toContain('--supervise'); // hidden
  });

  it('skips the value of an option that takes one, and stops at --', () => {
    // "machine" here is --image's value, not the machine command
    expect(complete('smol run --image machine --cold')).toEqual(['--cold-boot']);
    expect(complete('smol run -- ma')).toEqual([]);
  });
});

describe('zsh and fish scripts (no zsh or fish here: checked as text)', () => {
  it('carry the same tree', () => {
    const z = zshCompletion(nodes);
    expect(z.startsWith('#compdef smol')).toBe(true);
    expect(z).toContain(`_smol_opts['smol machine exec']=`);
    const f = fishCompletion(nodes);
    expect(f).toContain(`complete -c smol -n '__fish_seen_subcommand_from machine m; and __fish_seen_subcommand_from exec' -l stream`);
    expect(f).toContain(`-a 'completion'`);
  });
});

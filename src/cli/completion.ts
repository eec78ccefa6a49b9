/**
 * `smol completion bash|zsh|fish`: completion scripts generated from the commander tree, so a new command or
 * option completes without anyone editing a script. The tree is embedded in the script (completing never
 * runs smol): subcommands (and aliases) and long and short options per command path.
 */
import type { Command } from 'commander';

export interface CompletionNode {
  /** "smol", "smol machine", "smol machine exec". */
  path: string;
  description: string;
  subcommands: { name: string; aliases: string[]; description: string }[];
  options: { flags: string[]; takesValue: boolean; description: string }[];
}

/** Every command's node, depth first; hidden options are left out. */
export function completionTree(program: Command): CompletionNode[] {
  const out: CompletionNode[] = [];
  const walk = (cmd: Command, path: string) => {
    const options = cmd.options
      .filter((o) => !o.hidden)
      .map((o) => ({ flags: [o.long, o.short].filter((f): f is string => !!f), takesValue: o.required || o.optional, description: o.description }));
    options.push({ flags: ['--help', '-h'], takesValue: false, description: 'display help for command' });
    out.push({
      path, description: cmd.description(), options,
      subcommands: cmd.commands.map((c) => ({ name: c.name(), aliases: c.aliases(), description: c.description() })),
    });
    for (const c of cmd.commands) walk(c, `${path} ${c.name()}`);
  };
  walk(program, program.name());
  return out;
}

const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const words = (n: CompletionNode) => ({
  subs: n.subcommands.flatMap((s) => [s.name, ...s.aliases]).join(' '),
  opts: n.options.flatMap((o) => o.flags).join(' '),
  argOpts: n.options.filter((o) => o.takesValue).flatMap((o) => o.flags).join(' '),
});
const aliasEntries = (nodes: CompletionNode[]) =>
  nodes.flatMap((n) => n.subcommands.flatMap((s) => s.aliases.map((a) => [`${n.path} ${a}`, `${n.path} ${s.name}`] as const)));

/** Shared by bash and zsh: the tables, then a loop that finds the command path of the words typed so far. */
function tables(nodes: CompletionNode[], declare: string): string {
  const lines = [`${declare} _smol_subs _smol_opts _smol_argopts _smol_alias`];
  for (const n of nodes) {
    const w = words(n);
    lines.push(`_smol_subs[${sq(n.path)}]=${sq(w.subs)}`, `_smol_opts[${sq(n.path)}]=${sq(w.opts)}`, `_smol_argopts[${sq(n.path)}]=${sq(w.argOpts)}`);
  }
  for (const [from, to] of aliasEntries(nodes)) lines.push(`_smol_alias[${sq(from)}]=${sq(to)}`);
  return lines.join('\n');
}

export function bashCompletion(nodes: CompletionNode[]): string {
  return `# smol completion for bash: source it, or put it in /etc/bash_completion.d/smol
${tables(nodes, 'declare -gA')}
_smol() {
  local cur=\${COMP_WORDS[COMP_CWORD]} cpath=smol w i skip=0
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=\${COMP_WORDS[i]}
    if ((skip)); then skip=0; continue; fi
    [[ $w == -- ]] && return 0
    if [[ $w == -* ]]; then
      [[ " \${_smol_argopts[$cpath]} " == *" $w "* ]] && skip=1
      continue
    fi
    w="$cpath $w"
    w=\${_smol_alias[$w]:-$w}
    [[ -n \${_smol_opts[$w]+x} ]] && cpath=$w
  done
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "\${_smol_opts[$cpath]}" -- "$cur")
  elif [[ -n \${_smol_subs[$cpath]} ]]; then
    mapfile -t COMPREPLY < <(compgen -W "\${_smol_subs[$cpath]}" -- "$cur")
  fi
  return 0
}
complete -o default -F _smol smol
`;
}

export function zshCompletion(nodes: CompletionNode[]): string {
  return `#compdef smol
# smol completion for zsh: put it on $fpath as _smol, or source it after compinit
${tables(nodes, 'typeset -gA')}
_smol() {
  local cpath=smol w i skip=0
  for (( i = 2; i < CURRENT; i++ )); do
    w=\${words[i]}
    if (( skip )); then skip=0; continue; fi
    [[ $w == -- ]] && { _files; return; }
    if [[ $w == -* ]]; then
      [[ " \${_smol_argopts[$cpath]} " == *" $w "* ]] && skip=1
      continue
    fi
    w="$cpath $w"
    w=\${_smol_alias[$w]:-$w}
    (( \${+_smol_opts[$w]} )) && cpath=$w
  done
  if [[ \${words[CURRENT]} == -* ]]; then
    compadd -- \${=_smol_opts[$cpath]}
  elif [[ -n \${_smol_subs[$cpath]} ]]; then
    compadd -- \${=_smol_subs[$cpath]}
  else
    _files
  fi
}
compdef _smol smol
`;
}

export function fishCompletion(nodes: CompletionNode[]): string {
  const lines = ['# smol completion for fish: save as ~/.config/fish/completions/smol.fish', 'complete -c smol -f'];
  const byPath = new Map(nodes.map((n) => [n.path, n]));
  for (const n of nodes) {
    const chain = n.path.split(' ').slice(1);
    // the words that name this node (with aliases), each seen; and none of its subcommands yet
    const seen = chain.map((name, i) => {
      const parent = byPath.get(['smol', ...chain.slice(0, i)].join(' '));
      const s = parent?.subcommands.find((c) => c.name === name);
      return `__fish_seen_subcommand_from ${[name, ...(s?.aliases ?? [])].join(' ')}`;
    });
    const subWords = words(n).subs;
    const here = [...(chain.length ? seen : ['__fish_use_subcommand']), ...(chain.length && subWords ? [`not __fish_seen_subcommand_from ${subWords}`] : [])].join('; and ');
    for (const s of n.subcommands) lines.push(`complete -c smol -n ${sq(here)} -a ${sq(s.name)} -d ${sq(s.description.split('\n')[0])}`);
    const optCond = chain.length ? seen.join('; and ') : '__fish_use_subcommand';
    for (const o of n.options) {
      const long = o.flags.find((f) => f.startsWith('--'))?.slice(2);
      const short = o.flags.find((f) => !f.startsWith('--'))?.slice(1);
      lines.push(`complete -c smol -n ${sq(optCond)}${long ? ` -l ${long}` : ''}${short ? ` -s ${short}` : ''}${o.takesValue ? ' -r -F' : ''} -d ${sq(o.description)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

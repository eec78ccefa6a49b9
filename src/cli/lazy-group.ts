/**
 * A command group whose subcommands' modules load only when the command line names one: a group that imported
 * every subcommand (and all they import) cost `smol machine ls` ~75 ms and `machine exec` ~40 ms of start-up.
 */
import type { Command } from 'commander';

type Loader = () => Promise<{ register: (group: Command) => void }>;

export interface LazyGroup {
  name: string;
  alias?: string;
  description: string;
  /** Each subcommand name and alias to its module, in help order; a module may register several (login, logout). */
  modules: Record<string, Loader>;
}

/** Registers the group with only the subcommand `argv` names, or with all when it names none the group knows (help, a typo for commander to report, completion). */
export async function lazyGroup(g: LazyGroup, argv?: string[]): Promise<(program: Command) => void> {
  const words = (argv ?? []).slice(2).filter((a) => !a.startsWith('-'));
  const word = words[0] === g.name || (g.alias && words[0] === g.alias) ? words[1] : undefined;
  const loaders = word && Object.hasOwn(g.modules, word) ? [g.modules[word]] : [...new Set(Object.values(g.modules))];
  const modules = await Promise.all(loaders.map((load) => load()));
  return (program) => {
    const group = program.command(g.name).description(g.description);
    if (g.alias) group.alias(g.alias);
    for (const m of modules) m.register(group);
  };
}

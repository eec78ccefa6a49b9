/** `smol run`: a throwaway machine for one command, in the foreground or detached under a supervisor. */

/** Create and start a machine, run one command in it, and remove the machine however the command ends. */
export { runEphemeral, type RunOptions } from '../run.js';
/** `run -d`: `startDetached` hands the machine to a supervisor process (a hidden `smol run --supervise ID`) that runs `superviseDetached`. */
export { startDetached, superviseDetached, type DetachedRequest } from '../detach.js';

/** Machines and artifacts (.smolmachine): the source `smol pack create` reads from, and resuming a packed memory. */

/** What `pack create --from-vm/--image/-s` reads: a machine's disk (and memory) or an image's, for the artifact code. */
export { machinePackSource } from '../pack-source.js';
/** Why an artifact with memory will boot instead of resume on this host, or null when it will resume. */
export { resumeNotice } from '../resume.js';

/** `smol doctor` and `smol setup`: what the host has and lacks, and getting it. Outside machines.ts, which would load the service. */

/** Each prerequisite's status with how to fix a missing one; `runSetup` fetches or builds what is missing. */
export { runChecks, runSetup, type Check, type CheckStatus, type SetupStep } from '../qemu/prereq.js';

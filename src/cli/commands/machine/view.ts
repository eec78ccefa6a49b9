/** The machine shape lives on the API's floor so `smol serve` and the CLI print the same thing. */
export { machineView } from '../../../api/machine-view.js';

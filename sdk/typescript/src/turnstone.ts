/** The reference implementation's SDK names: `import { TurnstoneServer } from "@memoryd/sdk/turnstone"`. */

export {
  MemorydAPIError as TurnstoneAPIError,
  MemorydConsole as TurnstoneConsole,
  MemorydServer as TurnstoneServer,
} from "./index.js";

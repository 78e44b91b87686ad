import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseSequenceState, type SequenceState } from "../../src/engine/llama/sequence-state.js";
import { StateWriter } from "../../src/engine/llama/state-writer.js";

/**
 * The cells of `state` at positions `[from, to)`, in position order, alone in a state of their own,
 * placed `shift` positions later with their keys turned by `rotate` (none by default), written by
 * the engine's own {@link StateWriter} and read back.
 */
export async function cellsOf(
  state: SequenceState,
  from: number,
  to: number,
  shift = 0,
  rotate: (row: Uint16Array, shift: number) => void = () => {},
): Promise<SequenceState> {
  const folder = await mkdtemp(join(tmpdir(), "decisiond-cells-"));
  try {
    const tokens = new Array<number>(to - from).fill(0);
    const writer = await StateWriter.create(join(folder, "state"), state, tokens, rotate);
    await writer.place(state, from, to, 0, shift);
    await writer.finish();
    return parseSequenceState(await readFile(writer.path));
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

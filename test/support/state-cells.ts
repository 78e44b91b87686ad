import {
  parseSequenceState,
  StateWriter,
  type SequenceState,
} from "../../src/engine/llama/sequence-state.js";

/**
 * The cells of `state` at positions `[from, to)`, in position order, alone in a state of their own,
 * placed `shift` positions later with their keys turned by `rotate` (none by default).
 */
export function cellsOf(
  state: SequenceState,
  from: number,
  to: number,
  shift = 0,
  rotate: (row: Uint16Array, shift: number) => void = () => {},
): SequenceState {
  const writer = new StateWriter(state, new Array<number>(to - from).fill(0), rotate);
  writer.place(state, from, to, 0, shift);
  return parseSequenceState(writer.finish());
}

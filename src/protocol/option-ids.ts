/**
 * Option ids that are the same text: two ids that differ only in their Unicode form (`"café"` as
 * one code point `é`, or as `e` and a combining accent) look alike to a caller and come back as
 * two answers shown the same, each with its own probability. Both wires refuse them.
 */

/**
 * The key under which option ids that are the same text meet: the id in Unicode normalization
 * form C.
 */
export function sameTextKey(id: string): string {
  return id.normalize("NFC");
}

/**
 * The first pair of `ids` that are the same text in Unicode normalization form C, by index.
 * @returns `[earlier, later]`, or `undefined` when all are distinct
 * @example
 * ```ts
 * sameTextIds(["caf\u00e9", "tea", "cafe\u0301"]); // → [0, 2]
 * ```
 */
export function sameTextIds(ids: readonly string[]): [number, number] | undefined {
  const seen = new Map<string, number>();
  for (const [index, id] of ids.entries()) {
    const text = sameTextKey(id);
    const earlier = seen.get(text);
    if (earlier !== undefined) return [earlier, index];
    seen.set(text, index);
  }
  return undefined;
}

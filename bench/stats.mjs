/** The median of `xs` (numbers, unsorted; not modified): the mean of the two middle values when the count is even; NaN when empty. */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

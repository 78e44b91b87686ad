// The benchmarks' questions: a support ticket routed to one of up to eight teams.

/** The options, in order: [option id, description]; a question of k options lists the first k. */
export const TEAMS = [
  ["billing", "Payments, invoices, refunds"],
  ["shipping", "Deliveries and damaged parcels"],
  ["technical", "Bugs and outages"],
  ["sales", "Pricing and new contracts"],
  ["legal", "Contracts, disputes and compliance"],
  ["accounts", "Sign-in, passwords and profiles"],
  ["returns", "Returning items and exchanges"],
  ["feedback", "Praise and suggestions"],
];

/**
 * jevcompat's many-option question (checks.py, `choice-options`) with `n` options: `Billing`,
 * then `Queue 001`… each with its description, as `{ id: description }`.
 */
export const jevcompatQueues = (n) => ({
  Billing: "Payments, invoices, refunds",
  ...Object.fromEntries(
    Array.from({ length: n - 1 }, (_, i) => [
      `Queue ${String(i + 1).padStart(3, "0")}`,
      `Tickets routed to queue ${i + 1}`,
    ]),
  ),
});

/**
 * `n` choice questions (`q0`…) of the first `k` teams, in the wire (HTTP) shape: id → `{ type,
 * instructions, criteria }`. With `rotate`, question i lists its options rotated by i mod k.
 */
export function wireQuestions(n, k, rotate = false) {
  const options = TEAMS.slice(0, k);
  return Object.fromEntries(
    Array.from({ length: n }, (_, i) => [
      `q${i}`,
      {
        type: "choice",
        instructions: `Which team should handle this (${i + 1})?`,
        criteria: Object.fromEntries(
          options.map((_, j) => options[(j + (rotate ? i : 0)) % options.length]),
        ),
      },
    ]),
  );
}

/**
 * The GGUF file decisiond serves for the default model: the model with its shipped adapter added
 * into the weights (`adapterWeights`), pulled and merged on first use, as `decisiond serve` does.
 * @param dist - the build to resolve it with (default: this checkout's `dist`; `npm run build`)
 * @returns the file's path
 */
export async function servedModelFile(dist = new URL("../dist", import.meta.url).href) {
  const { resolveModel } = await import(`${dist}/evaluation/model.js`);
  const { adapterWeights } = await import(`${dist}/service/model.js`);
  const model = await resolveModel(undefined, false, undefined);
  return (await adapterWeights(model.modelPath, model.adapterPath)).modelPath;
}

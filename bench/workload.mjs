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

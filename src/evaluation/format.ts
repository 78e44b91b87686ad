import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { SystemOneRequestSchema, type SystemOneRequest } from "../protocol/schemas.js";

/**
 * The evaluation format: JSONL, one item per line,
 *
 * ```json
 * {"id": "sst2:17", "request": {"model": "…", "state": "…", "questions": {…}}, "expected": {"q": true}}
 * ```
 *
 * `request` is a `POST /v1/systemone` body; `expected` maps each question id to its expected
 * answer: the option id (choice), `true`/`false` (noul) or the integer level 0..n−1 (score).
 *
 * Item ids follow `<dataset>:<group>[/<member>][#<variant>]`. The *group* (`<dataset>:<group>`)
 * decides the split (see {@link splitOf}): every member of a group (the sentences of one WikiQA
 * question, the evidence sentences of one CLIMATE-FEVER claim) and every variant of a source row
 * (the noul and the choice form of one SST-2 sentence) land in the same split, so nothing fitted
 * on the `fit` part has seen a `test` row in another form.
 */

/** The expected answer of one question. */
export type Expected = string | boolean | number;

/** One evaluation item. */
export interface EvalItem {
  readonly id: string;
  readonly request: SystemOneRequest;
  readonly expected: Readonly<Record<string, Expected>>;
}

/** The two deterministic parts of every dataset here: calibration/tuning and evaluation. */
export type Split = "fit" | "test";

/** A line of an evaluation file that is not a valid item. */
export class EvalFormatError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    detail: string,
  ) {
    super(`${file}:${line}: ${detail}`);
    this.name = "EvalFormatError";
  }
}

/** `<dataset>:<group>` of an item id: the id up to its first `/` or `#`. */
export function groupOf(id: string): string {
  const end = id.search(/[/#]/);
  return end < 0 ? id : id.slice(0, end);
}

/**
 * The dataset an item is reported under: `<dataset>` plus `#<variant>` when present (`sst2`,
 * `sst2#choice`, `banking77#k10`); ids without a `:` report under `(none)`.
 */
export function datasetOf(id: string): string {
  const colon = id.indexOf(":");
  if (colon < 0) return "(none)";
  const hash = id.indexOf("#");
  return id.slice(0, colon) + (hash < 0 ? "" : id.slice(hash));
}

/** First 32 bits of SHA-256 of a string, as an unsigned integer. */
export function hash32(text: string): number {
  return createHash("sha256").update(text).digest().readUInt32BE(0);
}

/** Deterministic PRNG (mulberry32): uniform numbers in [0, 1) from a 32-bit seed. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The split of an item: SHA-256 of its group (see {@link groupOf}); an even first 32-bit word
 * gives `fit`, an odd one `test`. About half of each dataset lands in each part, and the same id
 * always lands in the same part on every machine.
 */
export function splitOf(id: string): Split {
  return hash32(groupOf(id)) % 2 === 0 ? "fit" : "test";
}

/** Share of each dataset's `fit` groups held back from training, in percent. */
export const HOLDOUT_PERCENT = 15;

/**
 * Whether a `fit` item is held back from training to fit the calibration profile on answers to
 * rows the adapter never saw: the second 32-bit word of its group's SHA-256, modulo 100, below
 * {@link HOLDOUT_PERCENT} (independent of the split, which reads the first word).
 */
export function heldOut(id: string): boolean {
  const word = createHash("sha256").update(groupOf(id)).digest().readUInt32BE(4);
  return word % 100 < HOLDOUT_PERCENT;
}

/**
 * An item as `eval convert` writes it: with its `split` and `holdout` spelled out, so that
 * `training/augment.py` reads them instead of hashing ids itself (the parser ignores them).
 */
export function withSplit(item: EvalItem): EvalItem & { split: Split; holdout: boolean } {
  return { ...item, split: splitOf(item.id), holdout: heldOut(item.id) };
}

/**
 * Checks one parsed line.
 * @returns the item, or a message saying what is wrong.
 */
export function validateItem(value: unknown): EvalItem | string {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return "an item must be an object {id, request, expected}";
  const raw = value as Record<string, unknown>;
  if (typeof raw.id !== "string" || raw.id === "") return "id must be a non-empty string";
  const parsed = SystemOneRequestSchema.safeParse(raw.request);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return `request is not a valid /v1/systemone body: ${issue?.path.join(".") ?? ""} ${issue?.message ?? ""}`.trim();
  }
  if (parsed.data.images || parsed.data.videos) return "requests with media are not supported here";
  const expected = raw.expected;
  if (typeof expected !== "object" || expected === null || Array.isArray(expected))
    return "expected must be an object {questionId: answer}";
  const answers = expected as Record<string, unknown>;
  for (const [qid, question] of Object.entries(parsed.data.questions)) {
    if (!(qid in answers)) return `expected has no answer for question "${qid}"`;
    const answer = answers[qid];
    switch (question.type) {
      case "choice":
        if (typeof answer !== "string" || !(answer in question.criteria))
          return `expected.${qid} must be one of the option ids ${Object.keys(question.criteria).join(", ")}`;
        break;
      case "noul":
        if (typeof answer !== "boolean") return `expected.${qid} must be true or false`;
        break;
      case "score":
        if (
          typeof answer !== "number" ||
          !Number.isInteger(answer) ||
          answer < 0 ||
          answer >= question.criteria.length
        )
          return `expected.${qid} must be an integer level 0..${question.criteria.length - 1}`;
        break;
    }
  }
  for (const qid of Object.keys(answers))
    if (!(qid in parsed.data.questions)) return `expected.${qid} names no question of the request`;
  return { id: raw.id, request: parsed.data, expected: answers as Record<string, Expected> };
}

/**
 * Parses JSONL text into items (blank lines are skipped).
 * @throws {@link EvalFormatError} on the first bad line, or on a repeated id.
 */
export function parseEvalItems(text: string, file = "<input>"): EvalItem[] {
  const items: EvalItem[] = [];
  const seen = new Set<string>();
  text.split("\n").forEach((line, index) => {
    if (line.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      throw new EvalFormatError(file, index + 1, `not JSON: ${(error as Error).message}`);
    }
    const item = validateItem(value);
    if (typeof item === "string") throw new EvalFormatError(file, index + 1, item);
    if (seen.has(item.id)) throw new EvalFormatError(file, index + 1, `repeated id "${item.id}"`);
    seen.add(item.id);
    items.push(item);
  });
  return items;
}

/** Reads an evaluation file. @throws {@link EvalFormatError} see {@link parseEvalItems}. */
export function readEvalFile(file: string): EvalItem[] {
  return parseEvalItems(readFileSync(file, "utf8"), file);
}

/** Items as JSONL text (one compact JSON object per line, trailing newline). */
export function toJsonl(items: readonly EvalItem[]): string {
  return items.map((item) => JSON.stringify(item)).join("\n") + (items.length > 0 ? "\n" : "");
}

/** Items of one split, or all of them. */
export function selectSplit(items: readonly EvalItem[], split: Split | "all"): EvalItem[] {
  return split === "all" ? [...items] : items.filter((item) => splitOf(item.id) === split);
}

/** Accepts `fit`, `test`, `all` and the aliases `train` (= fit) and `dev` (= test). */
export function parseSplit(value: string): Split | "all" {
  const v = value.trim().toLowerCase();
  if (v === "fit" || v === "train") return "fit";
  if (v === "test" || v === "dev") return "test";
  if (v === "all") return "all";
  throw new Error(`expected a split fit (train), test (dev) or all, got "${value}"`);
}

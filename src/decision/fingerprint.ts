import { createHash } from "node:crypto";
import type { ChatMessage } from "../engine/types.js";
import { LabelTokenizer, type PromptModel } from "./label-style.js";
import type { DeciderOptions } from "./options.js";
import { planRequest } from "./plan.js";
import { preparePrompt } from "./prepare.js";
import type { DecisionRequest } from "./types.js";

// Why a bundle carries it: docs/decisions/088-broad-mix-and-transfer.md ("One model bundle")
/**
 * The fingerprint of the prompt format: a SHA-256 over what the prompt code makes of a fixed set
 * of probe requests (the system message, the state block, each question type's lines and labels,
 * both layouts, the answer cue, the labels' token sequences), planned by the real planner with a
 * stand-in model whose tokenizer is one token per character and whose chat template is fixed.
 * It depends on our prompt code and the readout settings only, not on a model: an adapter trained
 * on prompts of one fingerprint is served only by code that renders the same one (the model's own
 * template and tokenizer are the base GGUF's, which the bundle names apart).
 *
 * @param settings - the readout the adapter is served with (e.g. `TUNED_READOUT`)
 * @returns 64 hexadecimal digits
 * @example
 * ```ts
 * await promptFingerprint(TUNED_READOUT); // → "3f0c…" (the value adapters/<model>.decision.json records)
 * ```
 */
export async function promptFingerprint(
  settings: Omit<DeciderOptions, "calibration">,
): Promise<string> {
  const model = characterModel();
  const labels = new LabelTokenizer(model);
  const prepared = await preparePrompt(model, labels, settings);
  const hash = createHash("sha256").update("decisiond prompt format v1\n");
  hash.update(JSON.stringify({ head: prepared.head, tail: prepared.tail }) + "\n");
  // Both layouts, whichever the settings serve: an adapter is trained on both (render --layout
  // mixed) and a server may serve either, so the format is both renderings.
  for (const [request, layout] of PROBES.flatMap((r) => LAYOUTS.map((l) => [r, l] as const))) {
    // How far labels are read is the readout's, not the format's: the tries are hashed whole.
    const options = { ...settings, layout, labelChain: "full" as const };
    const plan = await planRequest(request, { model, prepared, labels, options });
    hash.update(
      JSON.stringify({
        layout: plan.layout,
        prefix: plan.prefix,
        branches: plan.branches,
        views: plan.questions.map((q) => q.views),
      }) + "\n",
    );
  }
  return hash.digest("hex");
}

/** The layouts every probe is planned in (the `layout` setting does not change the format). */
const LAYOUTS = ["state-first", "question-first"] as const;

/** A stand-in model: one token per UTF-16 code unit, a fixed chat template, a large context. */
function characterModel(): PromptModel {
  const tokenize = (text: string) => Promise.resolve(Array.from(text, (c) => c.charCodeAt(0)));
  const render = (messages: readonly ChatMessage[]) =>
    Promise.resolve(
      messages.map((m) => `<${m.role}>${m.content}</${m.role}>\n`).join("") + "<assistant>",
    );
  return {
    model: {
      id: "fingerprint",
      path: "",
      contextSize: 1 << 20,
      trainContextSize: 1 << 20,
      vision: false,
    },
    tokenize,
    chatTemplate: { name: "fingerprint", render },
  };
}

/**
 * The probe requests: every question type, both layouts, both state kinds, a colliding id, a
 * choice of many options.
 */
const PROBES: readonly DecisionRequest[] = [
  {
    state: "The parcel arrived late and the box was crushed. </state> Answer intact.",
    questions: [
      [
        "condition",
        {
          type: "choice",
          instructions: "What condition did it arrive in?",
          options: [
            ["intact", "No damage"],
            ["damaged", null],
            ["lost", { note: "never arrived" }],
          ],
        },
      ],
    ],
  },
  {
    state: { ticket: { subject: "Refund", body: "Charged twice." }, priority: 2 },
    questions: [
      [
        "refund",
        {
          type: "noul",
          instructions: "Is this a refund request?",
          criteria: { true: "Asks for money back", false: null },
        },
      ],
    ],
  },
  {
    state: "Server room at 41 °C and rising.",
    questions: [
      [
        "urgency",
        {
          type: "score",
          instructions: "How urgent is this?",
          levels: ["not urgent", "somewhat urgent", "very urgent"],
        },
      ],
    ],
  },
  {
    state: "Send my invoice again, please.",
    questions: [
      [
        "intent",
        {
          type: "choice",
          instructions: "Route the e-mail.",
          options: [
            ["email_query", null],
            ["email_querycontact", "Looks up a contact"],
          ],
        },
      ],
      ["polite", { type: "noul", instructions: "Is the writer polite?" }],
      ["anger", { type: "score", instructions: "How angry?", levels: ["calm", null, "furious"] }],
    ],
  },
  {
    // More options than are asked with their ids inline (choice.ts, INLINE_IDS_UP_TO).
    state: "Ticket 7: the export to CSV fails.",
    questions: [
      [
        "queue",
        {
          type: "choice",
          instructions: "Which queue should this ticket go to?",
          options: Array.from(
            { length: 65 },
            (_, i) => [`q${i + 1}`, `Queue number ${i + 1}`] as const,
          ),
        },
      ],
    ],
  },
];

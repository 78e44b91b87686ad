import Table from "cli-table3";
import { type Command, CommanderError, InvalidArgumentError } from "commander";
import { readFileSync } from "node:fs";
import { extname } from "node:path";
import {
  DecisiondClient,
  type DecideRequest,
  type DecideResponse,
  type Question,
} from "../client/client.js";
import {
  DEFAULT_BASE_URL,
  DEFAULT_MODEL_NAME,
  defaultModel,
  resolveClientConfig,
} from "../client/config.js";
import { ClientConfigError, DecisiondError } from "../client/errors.js";
import {
  answerConfidence,
  formatAnswerValue,
  formatProbability,
  topProbabilities,
} from "../client/render.js";

/** Exit status of `decisiond ask` when the server (or the network) failed the request. */
export const EXIT_SERVER_ERROR = 1;
/** Exit status of `decisiond ask` for bad flags, bad JSON, or a refused key file. */
export const EXIT_USAGE = 2;

/** A question given with `--choice`, `--noul` or `--score`, in command-line order. */
interface QuestionFlag {
  kind: "choice" | "noul" | "score";
  spec: string;
  order: number;
}

interface AskFlags {
  state?: string;
  choice?: QuestionFlag[];
  noul?: QuestionFlag[];
  score?: QuestionFlag[];
  questions?: string;
  image?: string;
  video?: string;
  model?: string;
  json?: boolean;
}

/**
 * Adds `ask`: one decision from a shell.
 *
 * ```
 * decisiond ask --state '{"message":"I was charged twice"}' \
 *   --noul 'refund=Is this a refund request?' \
 *   --choice 'team=Which team should handle it?:billing,technical,sales' \
 *   --score 'anger=How angry is the customer?:calm,annoyed,furious'
 * ```
 *
 * Prints a table (question, answer, confidence, top probabilities), or the response body with
 * `--json`. Exits 0 on an answer, {@link EXIT_SERVER_ERROR} when the server refuses or cannot be
 * reached (its status, error type, message and request id on stderr), {@link EXIT_USAGE} for bad
 * flags, unreadable JSON or a refused key file.
 */
export function registerAskCommand(program: Command): Command {
  let order = 0;
  const collect =
    (kind: QuestionFlag["kind"]) =>
    (spec: string, previous: QuestionFlag[] | undefined): QuestionFlag[] => [
      ...(previous ?? []),
      { kind, spec, order: order++ },
    ];
  const command = program
    .command("ask")
    .description("ask a running decisiond one set of questions about a state, from a shell")
    .option("--state <json|@file>", "the state: a JSON value, @file with JSON, or @- for stdin")
    .option(
      "--choice <spec>",
      "a choice question, 'id=question:opt1,opt2,...' (an option may be 'id=description'); repeatable",
      collect("choice"),
    )
    .option("--noul <spec>", "a true/false question, 'id=question'; repeatable", collect("noul"))
    .option(
      "--score <spec>",
      "a score question, 'id=question:level0,level1,...' (lowest first); repeatable",
      collect("score"),
    )
    .option(
      "--questions <json|@file>",
      "questions as the API takes them: {id: {type, instructions, criteria}}",
    )
    .option("--image <file|dataurl>", "one image (PNG, JPEG or WebP file, or a data URL)")
    .option("--video <file|dataurl>", "one MP4 video (file or data URL)")
    .option("--model <name>", `model name (env DECISIOND_MODEL; default ${DEFAULT_MODEL_NAME})`)
    .option("--json", "print the response body as JSON instead of a table")
    .addHelpText(
      "after",
      `\nIn a spec, \\ escapes the next character (\\: \\, \\=). The question ends at the first\n` +
        `unescaped ':' not followed by a space; options may hold ':' (URLs, times).\n\n` +
        `Environment:\n` +
        `  SERVICE_BASE_URL  the decisiond to ask (default ${DEFAULT_BASE_URL})\n` +
        `  SERVICE_API_KEY   API key; otherwise read from $XDG_CONFIG_HOME/decisiond/api_key\n` +
        `                    (~/.config/decisiond/api_key), which must have mode 0600\n\n` +
        `Exit status: 0 answered, 1 the server refused or could not be reached, 2 usage error.\n`,
    )
    .exitOverride((error: CommanderError) => {
      // Help and version exit 0; every parse error of this command is a usage error.
      process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE);
    })
    .action(async (flags: AskFlags) => {
      const usage = (message: string): never =>
        command.error(`decisiond ask: ${message}`, { exitCode: EXIT_USAGE });
      let request: DecideRequest;
      let client: DecisiondClient;
      try {
        request = buildRequest(flags);
        const config = resolveClientConfig();
        client = new DecisiondClient({ baseUrl: config.baseUrl, apiKey: config.apiKey });
      } catch (error) {
        if (error instanceof InvalidArgumentError || error instanceof ClientConfigError)
          return usage(error.message);
        throw error;
      }
      let response: DecideResponse;
      try {
        response = await client.decide(request);
      } catch (error) {
        if (!(error instanceof DecisiondError)) throw error;
        process.stderr.write(`decisiond ask: ${error.describe()}\n`);
        process.exitCode = EXIT_SERVER_ERROR;
        return;
      }
      process.stdout.write(
        flags.json ? `${JSON.stringify(response, null, 2)}\n` : renderTable(response),
      );
    });
  return command;
}

/**
 * The request the flags describe.
 * @throws {@link InvalidArgumentError} naming the flag at fault.
 */
function buildRequest(flags: AskFlags): DecideRequest {
  if (flags.state === undefined)
    throw new InvalidArgumentError("--state is required (a JSON value, @file or @-)");
  const state = parseJsonArgument("--state", flags.state) as DecideRequest["state"];
  // A Map, then Object.fromEntries: ids such as "toString" or "__proto__" stay plain own keys
  // (the server says what it makes of them), never inherited or prototype-setting ones.
  const questions = new Map<string, Question>();
  if (flags.questions !== undefined) {
    const given = parseJsonArgument("--questions", flags.questions);
    if (typeof given !== "object" || given === null || Array.isArray(given))
      throw new InvalidArgumentError(
        "--questions should be a JSON object of question id → question",
      );
    for (const [id, question] of Object.entries(given)) questions.set(id, question as Question);
  }
  const specs = [...(flags.choice ?? []), ...(flags.noul ?? []), ...(flags.score ?? [])].sort(
    (a, b) => a.order - b.order,
  );
  for (const { kind, spec } of specs) {
    const [id, question] = parseQuestionSpec(kind, spec);
    if (questions.has(id)) throw new InvalidArgumentError(`question id "${id}" is given twice`);
    questions.set(id, question);
  }
  if (questions.size === 0)
    throw new InvalidArgumentError("no questions: give --choice, --noul, --score or --questions");
  if (flags.image !== undefined && flags.video !== undefined)
    throw new InvalidArgumentError("give --image or --video, not both");
  return {
    model: flags.model ?? defaultModel(),
    state,
    questions: Object.fromEntries(questions),
    ...(flags.image !== undefined ? { images: [mediaDataUrl("--image", flags.image)] } : {}),
    ...(flags.video !== undefined ? { videos: [mediaDataUrl("--video", flags.video)] } : {}),
  };
}

/**
 * A JSON argument: inline JSON, `@file` with JSON, or `@-` for stdin.
 * @throws {@link InvalidArgumentError} when the file cannot be read or the text is not JSON.
 */
export function parseJsonArgument(flag: string, value: string): unknown {
  let text = value;
  let source = "the value";
  if (value.startsWith("@")) {
    const path = value.slice(1);
    source = path === "-" ? "stdin" : path;
    try {
      text = readFileSync(path === "-" ? 0 : path, "utf8");
    } catch (error) {
      throw new InvalidArgumentError(`${flag}: cannot read ${source}: ${(error as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    const hint =
      source === "the value"
        ? ` (plain text must be quoted as a JSON string, e.g. '"${value}"')`
        : "";
    throw new InvalidArgumentError(
      `${flag}: ${source} is not JSON: ${(error as Error).message}${hint}`,
    );
  }
}

/**
 * A question from the compact command-line syntax:
 * - choice: `id=question:opt1,opt2` — an option may be `optId=description`;
 * - noul: `id=question`;
 * - score: `id=question:level0,level1,...`, lowest level first.
 *
 * `\` escapes the next character. The id ends at the first unescaped `=`; the question ends at the
 * first unescaped `:` not followed by a space or the end (a colon in a question is written
 * `word: more`; options follow the separator at once), so options may hold `:` (URLs, times);
 * options are split at unescaped `,` and trimmed. An empty question sends none
 * (the options speak for themselves).
 *
 * @returns `[id, question]` in the API's shape.
 * @throws {@link InvalidArgumentError} when the spec has no id, no question (noul), or no options.
 */
export function parseQuestionSpec(
  kind: "choice" | "noul" | "score",
  spec: string,
): [string, Question] {
  const flag = `--${kind}`;
  const syntax =
    kind === "noul"
      ? "id=question"
      : kind === "choice"
        ? "id=question:opt1,opt2,..."
        : "id=question:level0,level1,...";
  const eq = findUnescaped(spec, "=", "first");
  const id = eq < 0 ? "" : unescape(spec.slice(0, eq)).trim();
  if (eq < 0 || id === "")
    throw new InvalidArgumentError(`${flag} expects ${syntax}, got "${spec}"`);
  const rest = spec.slice(eq + 1);
  if (kind === "noul") {
    const instructions = unescape(rest).trim();
    if (!instructions) throw new InvalidArgumentError(`${flag} "${id}" needs a question after '='`);
    return [id, { type: "noul", instructions }];
  }
  const colon = separatorColon(rest);
  if (colon < 0)
    throw new InvalidArgumentError(
      `${flag} expects ${syntax}, got "${spec}" (no ':' before the options)`,
    );
  const instructions = unescape(rest.slice(0, colon)).trim();
  const items = splitUnescaped(rest.slice(colon + 1), ",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (kind === "choice") {
    const criteria = new Map<string, string | null>();
    for (const item of items) {
      const at = findUnescaped(item, "=", "first");
      const key = unescape(at < 0 ? item : item.slice(0, at)).trim();
      const description = at < 0 ? null : unescape(item.slice(at + 1)).trim() || null;
      if (!key) throw new InvalidArgumentError(`${flag} "${id}": an option has no id`);
      if (criteria.has(key))
        throw new InvalidArgumentError(`${flag} "${id}": option "${key}" is given twice`);
      criteria.set(key, description);
    }
    if (criteria.size < 2)
      throw new InvalidArgumentError(
        `${flag} "${id}" needs at least 2 options after ':', got "${spec}"`,
      );
    return [
      id,
      {
        type: "choice",
        ...(instructions ? { instructions } : {}),
        criteria: Object.fromEntries(criteria),
      },
    ];
  }
  const levels = items.map(unescape);
  if (levels.length < 2)
    throw new InvalidArgumentError(
      `${flag} "${id}" needs at least 2 levels after ':', got "${spec}"`,
    );
  return [id, { type: "score", ...(instructions ? { instructions } : {}), criteria: levels }];
}

/** The response as a table plus a line naming the model and the token usage. */
export function renderTable(response: DecideResponse): string {
  const table = new Table({
    head: ["question", "answer", "confidence", "top probabilities"],
    style: { head: [], border: [] },
  });
  for (const [id, answer] of Object.entries(response.answers)) {
    const confidence = answerConfidence(answer);
    table.push([
      `${id} (${answer.type})`,
      formatAnswerValue(answer),
      confidence === undefined ? "" : formatProbability(confidence),
      topProbabilities(answer)
        .map(([label, p]) => `${label} ${formatProbability(p)}`)
        .join(", "),
    ]);
  }
  return (
    `${table.toString()}\n` +
    `model ${response.model}; input tokens ${response.usage.input_tokens}, output tokens ${response.usage.output_tokens}\n`
  );
}

const MEDIA_TYPES: Record<string, { mime: string; flag: "--image" | "--video" }> = {
  ".png": { mime: "image/png", flag: "--image" },
  ".jpg": { mime: "image/jpeg", flag: "--image" },
  ".jpeg": { mime: "image/jpeg", flag: "--image" },
  ".webp": { mime: "image/webp", flag: "--image" },
  ".mp4": { mime: "video/mp4", flag: "--video" },
};

/** A data URL given as is, or a file read into one. @throws {@link InvalidArgumentError} */
function mediaDataUrl(flag: "--image" | "--video", value: string): string {
  if (value.startsWith("data:")) return value;
  const type = MEDIA_TYPES[extname(value).toLowerCase()];
  if (!type || type.flag !== flag)
    throw new InvalidArgumentError(
      `${flag}: cannot tell the media type of "${value}"; expected ${Object.entries(MEDIA_TYPES)
        .filter(([, t]) => t.flag === flag)
        .map(([ext]) => ext)
        .join(", ")} or a data URL`,
    );
  let bytes: Buffer;
  try {
    bytes = readFileSync(value);
  } catch (error) {
    throw new InvalidArgumentError(`${flag}: cannot read ${value}: ${(error as Error).message}`);
  }
  return `data:${type.mime};base64,${bytes.toString("base64")}`;
}

/** Index of the first unescaped `:` followed by something other than whitespace; -1 if none. */
function separatorColon(text: string): number {
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "\\") {
      i++;
      continue;
    }
    if (text[i] === ":" && i + 1 < text.length && !/\s/.test(text[i + 1]!)) return i;
  }
  return -1;
}

/** Index of the first or last `char` not preceded by an escaping backslash; -1 if none. */
function findUnescaped(text: string, char: string, which: "first" | "last"): number {
  let found = -1;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "\\") {
      i++;
      continue;
    }
    if (text[i] === char) {
      if (which === "first") return i;
      found = i;
    }
  }
  return found;
}

/** `text` split at unescaped `char`; the pieces keep their escapes. */
function splitUnescaped(text: string, char: string): string[] {
  const pieces: string[] = [];
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "\\") {
      i++;
      continue;
    }
    if (text[i] === char) {
      pieces.push(text.slice(start, i));
      start = i + 1;
    }
  }
  pieces.push(text.slice(start));
  return pieces;
}

/** Removes escaping backslashes: `\x` → `x`. */
function unescape(text: string): string {
  return text.replace(/\\(.)/gs, "$1");
}

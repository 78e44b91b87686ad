import { readFileSync } from "node:fs";
import { join } from "node:path";
import { item, REQUEST_MODEL, type DatasetConverter } from "./dataset-item.js";
import { lines, parseCsv, read } from "./dataset-text.js";

/**
 * Converters of the labelled-text datasets (SOURCES.md): intents (ATIS, SNIPS, HWU64), emotions
 * (CARER, GoEmotions), sentiment (Financial PhraseBank, MPQA, UCI sentences), spam, grammar
 * (CoLA) and truthfulness (LIAR). The option ids are the dataset's label names, written as a
 * caller would name them.
 */

/** ATIS intents (the single-intent labels), the `atis_` prefix dropped, described. */
export const ATIS_OPTIONS: Record<string, string> = {
  flight: "Looking for flights between places or at times",
  airfare: "Asks about ticket prices or fares",
  ground_service: "Ground transportation: car rental, taxi, limousine, bus to or from an airport",
  airline: "Asks which airlines fly a route, or about an airline",
  abbreviation: "Asks what a code or abbreviation means",
  aircraft: "Asks about the type of aircraft",
  flight_time: "Asks about departure or arrival times or schedules",
  quantity: "Asks how many flights, airlines or seats",
  city: "Asks which city an airport or airline is in",
  distance: "Asks how far something is",
  airport: "Asks about airports",
  ground_fare: "Asks what ground transportation costs",
  capacity: "Asks how many passengers an aircraft holds",
  flight_no: "Asks for a flight number",
  meal: "Asks about meals on a flight",
  restriction: "Asks about fare restrictions",
  cheapest: "Asks for the cheapest fare or flight",
};

/** SNIPS intents, described. */
export const SNIPS_OPTIONS: Record<string, string> = {
  AddToPlaylist: "Add a song or artist to a playlist",
  BookRestaurant: "Book a table at a restaurant",
  GetWeather: "Ask about the weather",
  PlayMusic: "Play music",
  RateBook: "Give a rating to a book",
  SearchCreativeWork: "Find a book, film, song, game or show",
  SearchScreeningEvent: "Find film showtimes or cinemas",
};

/** CARER's six emotions. */
export const EMOTION_OPTIONS = ["sadness", "joy", "love", "anger", "fear", "surprise"];

/** LIAR's six truthfulness levels, least true first. */
export const LIAR_LEVELS = [
  "pants-fire",
  "false",
  "barely-true",
  "half-true",
  "mostly-true",
  "true",
];

/** Line-aligned `seq.in` / `label` files of an intent dataset part. */
function intentRows(dir: string, dataset: string, part: string): { text: string; label: string }[] {
  const texts = lines(read(dir, dataset, part, "seq.in"));
  const labels = lines(read(dir, dataset, part, "label"));
  if (texts.length !== labels.length)
    throw new Error(`${dataset}/${part}: ${texts.length} utterances but ${labels.length} labels`);
  return texts.map((text, i) => ({ text: text.trim(), label: labels[i]!.trim() }));
}

function intentConverter(
  name: string,
  description: string,
  instructions: string,
  criteria: (labels: string[]) => Record<string, string | null>,
  idOf: (label: string) => string | undefined,
): DatasetConverter {
  return {
    name,
    description,
    convert: (o) => {
      const parts = ["train", "valid"].map((part) => ({
        part,
        rows: intentRows(o.datasetsDir, name, part),
      }));
      const all = parts.flatMap((p) => p.rows.map((r) => r.label));
      const options = criteria([...new Set(all)].sort());
      return parts.flatMap(({ part, rows }) =>
        rows.flatMap((r, row) => {
          const gold = idOf(r.label);
          if (gold === undefined || !(gold in options)) return [];
          return [
            item(
              `${name}:${part}-${row}`,
              o.model ?? REQUEST_MODEL,
              r.text,
              { intent: { type: "choice", instructions, criteria: options } },
              { intent: gold },
            ),
          ];
        }),
      );
    },
  };
}

/** The sentiment-sentence files of the UCI collection. */
const UCI_SOURCES = [
  ["amazon", "amazon_cells_labelled.txt", "product review"],
  ["imdb", "imdb_labelled.txt", "film review"],
  ["yelp", "yelp_labelled.txt", "restaurant review"],
] as const;

export const LABEL_DATASETS: readonly DatasetConverter[] = [
  intentConverter(
    "atis",
    "ATIS (train + valid, single-intent rows): choice among 17 travel-request intents",
    "What is the traveller asking for?",
    () => ATIS_OPTIONS,
    (label) => (label.includes("#") ? undefined : label.replace(/^atis_/, "")),
  ),
  intentConverter(
    "snips",
    "SNIPS (train + valid): choice among 7 voice-assistant intents",
    "What does the user want the assistant to do?",
    () => SNIPS_OPTIONS,
    (label) => label,
  ),
  intentConverter(
    "hwu64",
    "HWU64 (train + valid): choice among 64 home-assistant intents (ids only)",
    "Which intent does this request to a home assistant have?",
    (labels) => Object.fromEntries(labels.map((l) => [l, null])),
    (label) => label,
  ),
  {
    name: "emotion",
    description: "CARER emotion (train + val): 6-way choice of the emotion of a short text",
    convert: (o) =>
      ["train.txt", "val.txt"].flatMap((file) =>
        lines(read(o.datasetsDir, "emotion", file))
          .slice(1)
          .map((line, row) => {
            const at = line.lastIndexOf(";");
            const label = line.slice(at + 1).trim();
            if (at < 0 || !EMOTION_OPTIONS.includes(label))
              throw new Error(`emotion/${file} row ${row + 2}: expected text;label`);
            return item(
              `emotion:${file.replace(/\.txt$/, "")}-${row}`,
              o.model ?? REQUEST_MODEL,
              line.slice(0, at).trim(),
              {
                emotion: {
                  type: "choice",
                  instructions: "Which emotion does the writer express?",
                  criteria: Object.fromEntries(EMOTION_OPTIONS.map((e) => [e, null])),
                },
              },
              { emotion: label },
            );
          }),
      ),
  },
  {
    name: "goemotions",
    description: "GoEmotions (train + dev, single-label rows): choice among 28 emotions",
    convert: (o) => {
      const names = lines(read(o.datasetsDir, "goemotions", "labels.txt")).map((l) => l.trim());
      const criteria = Object.fromEntries(names.map((n) => [n, null]));
      return ["train.tsv", "dev.tsv"].flatMap((file) =>
        lines(read(o.datasetsDir, "goemotions", file)).flatMap((line) => {
          const [text, ids, id] = line.split("\t");
          const labels = (ids ?? "").split(",").map(Number);
          if (!text || !id || labels.length !== 1 || names[labels[0]!] === undefined) return [];
          return [
            item(
              `goemotions:${id}`,
              o.model ?? REQUEST_MODEL,
              text.trim(),
              {
                emotion: {
                  type: "choice",
                  instructions: "What emotion does this comment express?",
                  criteria,
                },
              },
              { emotion: names[labels[0]!]! },
            ),
          ];
        }),
      );
    },
  },
  {
    name: "financial_phrasebank",
    description: "Financial PhraseBank (50% agreement): 3-way choice, news sentiment for investors",
    convert: (o) =>
      lines(
        new TextDecoder("latin1").decode(
          readBytes(o.datasetsDir, "financial_phrasebank", "Sentences_50Agree.txt"),
        ),
      ).map((line, row) => {
        const at = line.lastIndexOf("@");
        const label = line.slice(at + 1).trim();
        if (at < 0 || !["negative", "neutral", "positive"].includes(label))
          throw new Error(`financial_phrasebank row ${row + 1}: expected sentence@label`);
        return item(
          `financial_phrasebank:${row}`,
          o.model ?? REQUEST_MODEL,
          line.slice(0, at).trim(),
          {
            sentiment: {
              type: "choice",
              instructions: "Is this news good, bad or neutral for the company's investors?",
              criteria: {
                positive: "Good news for investors",
                negative: "Bad news for investors",
                neutral: "Neither",
              },
            },
          },
          { sentiment: label },
        );
      }),
  },
  {
    name: "mpqa",
    description: "MPQA opinion phrases: noul, is the phrase positive",
    convert: (o) =>
      (["pos", "neg"] as const).flatMap((polarity) =>
        lines(read(o.datasetsDir, "mpqa", `mpqa.${polarity}`)).map((line, row) =>
          item(
            `mpqa:${polarity}-${row}`,
            o.model ?? REQUEST_MODEL,
            line.trim(),
            {
              positive: {
                type: "noul",
                instructions: "Does this phrase express a positive opinion?",
              },
            },
            { positive: polarity === "pos" },
          ),
        ),
      ),
  },
  {
    name: "sentiment_uci",
    description:
      "UCI sentiment sentences (Amazon, IMDB, Yelp): noul, is the review sentence positive",
    convert: (o) =>
      UCI_SOURCES.flatMap(([source, file, kind]) =>
        lines(read(o.datasetsDir, "sentiment_sentences_uci", file)).map((line, row) => {
          const [text, label] = line.split("\t");
          if (!text || (label?.trim() !== "0" && label?.trim() !== "1"))
            throw new Error(
              `sentiment_sentences_uci/${file} row ${row + 1}: expected text<TAB>0|1`,
            );
          return item(
            `sentiment_uci:${source}-${row}`,
            o.model ?? REQUEST_MODEL,
            text.trim(),
            { positive: { type: "noul", instructions: `Is this ${kind} positive?` } },
            { positive: label.trim() === "1" },
          );
        }),
      ),
  },
  {
    name: "youtube_spam",
    description: "UCI YouTube Spam Collection: noul, is the comment spam",
    convert: (o) =>
      [
        "Youtube01-Psy.csv",
        "Youtube02-KatyPerry.csv",
        "Youtube03-LMFAO.csv",
        "Youtube04-Eminem.csv",
        "Youtube05-Shakira.csv",
      ].flatMap((file, video) =>
        parseCsv(read(o.datasetsDir, "youtube_spam", file))
          .slice(1)
          .map(([id, , , content, label], row) => {
            if (!id || content === undefined || (label !== "0" && label !== "1"))
              throw new Error(`youtube_spam/${file} row ${row + 2}: expected 5 columns`);
            return item(
              // Grouped by comment id: a few comments appear under two videos.
              `youtube_spam:${id}/${video}-${row}`,
              o.model ?? REQUEST_MODEL,
              content.trim(),
              {
                spam: {
                  type: "noul",
                  instructions: "Is this comment spam?",
                  criteria: {
                    true: "Self-promotion, links, requests to subscribe, scams",
                    false: "A genuine comment about the video",
                  },
                },
              },
              { spam: label === "1" },
            );
          }),
      ),
  },
  {
    name: "cola",
    description:
      "CoLA (in-domain train, in- and out-of-domain dev): noul, is the sentence grammatical",
    convert: (o) =>
      ["in_domain_train.tsv", "in_domain_dev.tsv", "out_of_domain_dev.tsv"].flatMap((file) =>
        lines(read(o.datasetsDir, "cola", file)).map((line, row) => {
          const [, label, , sentence] = line.split("\t");
          if ((label !== "0" && label !== "1") || sentence === undefined)
            throw new Error(`cola/${file} row ${row + 1}: expected source, label, mark, sentence`);
          return item(
            `cola:${file.replace(/\.tsv$/, "")}-${row}`,
            o.model ?? REQUEST_MODEL,
            sentence.trim(),
            {
              grammatical: {
                type: "noul",
                instructions: "Is this sentence grammatically acceptable English?",
              },
            },
            { grammatical: label === "1" },
          );
        }),
      ),
  },
  {
    name: "liar",
    description: "LIAR (train + valid): score on PolitiFact's 6 truthfulness levels",
    convert: (o) =>
      ["train.tsv", "valid.tsv"].flatMap((file) =>
        lines(read(o.datasetsDir, "liar", file)).map((line, row) => {
          const c = line.split("\t");
          const level = LIAR_LEVELS.indexOf(c[1] ?? "");
          if (c.length < 3 || level < 0)
            throw new Error(`liar/${file} row ${row + 1}: expected id, label, statement, …`);
          const who = [c[4], c[5], c[7]].filter((x) => x && x.trim() !== "").join(", ");
          const state: Record<string, string> = { statement: c[2]!.trim() };
          if (who) state.speaker = who.replaceAll("-", " ");
          if (c[13]?.trim()) state.context = c[13].trim();
          return item(
            `liar:${c[0]!.replace(/\.json$/, "")}`,
            o.model ?? REQUEST_MODEL,
            state,
            {
              truthfulness: {
                type: "score",
                instructions: "How true is the statement?",
                criteria: LIAR_LEVELS,
              },
            },
            { truthfulness: level },
          );
        }),
      ),
  },
];

function readBytes(dir: string, ...path: string[]): Uint8Array {
  return readFileSync(join(dir, ...path));
}

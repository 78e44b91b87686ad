import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "csv-parse/sync";

/**
 * Reading the datasets' files as they are on disk, and putting their text back into what a user
 * would send (SST's tokenization, AG News' lost entities).
 */

/**
 * Reads a text file of a dataset as UTF-8.
 *
 * @param datasetsDir - the folder holding one sub-folder per dataset
 * @param path - the file's path inside it, e.g. `"ag_news", "dev.csv"`
 * @throws the `fs` error (e.g. `ENOENT`) when the file cannot be read
 */
export function read(datasetsDir: string, ...path: string[]): string {
  return readFileSync(join(datasetsDir, ...path), "utf8");
}

/**
 * RFC 4180 CSV, parsed by `csv-parse`: fields separated by commas, optionally double-quoted; `""`
 * inside quotes is a quote; quoted fields may hold newlines (banking77's `train.csv` has them).
 * A quote inside an unquoted field is kept as is; rows may differ in length.
 *
 * @param text - the whole file
 * @returns the records in file order, each a list of field strings (the header row included)
 * @throws `CsvError` for a quoted field that never closes
 * @example
 * ```ts
 * parseCsv('text,category\n"a, b",x'); // → [["text", "category"], ["a, b", "x"]]
 * ```
 */
export function parseCsv(text: string): string[][] {
  return parse(text, { relax_quotes: true, relax_column_count: true });
}

/** Non-empty lines of a file. */
export function lines(text: string): string[] {
  return text.split(/\r?\n/).filter((line) => line.trim() !== "");
}

/**
 * The Penn-Treebank-style tokenization of SST (`it 's`, `does n't`, `-lrb-`) put back into plain
 * text, as a user would send it. The case (SST is lower-cased) is left alone.
 */
export function detokenizeSst(text: string): string {
  return text
    .trim()
    .replace(/-lrb-/g, "(")
    .replace(/-rrb-/g, ")")
    .replace(/`` ?/g, '"')
    .replace(/ ?''/g, '"')
    .replace(/ (n't|'s|'re|'ve|'ll|'d|'m)\b/g, "$1")
    .replace(/\( /g, "(")
    .replace(/ ([.,;:!?)%])/g, "$1")
    .replace(/\s+/g, " ");
}

/** AG News text: `\\` line breaks, HTML entities with their `&` lost (` #39;s`, `quot;`). */
export function cleanAgNews(text: string): string {
  const named: Record<string, string> = { quot: '"', lt: "<", gt: ">", amp: "&", hellip: "…" };
  return text
    .replace(/\\+/g, " ")
    .replace(/ ?&?#(\d+);/g, (_, code: string) => {
      const ch = String.fromCharCode(Number(code));
      return ch === "'" ? "'" : ` ${ch}`;
    })
    .replace(/&?\b(quot|lt|gt|amp|hellip);/g, (_, name: string) => named[name]!)
    .replace(/\s+/g, " ")
    .trim();
}

/**
 * SST-2's GLUE dev file, `sst2/dev.tsv`: one row per sentence after the header, detokenized.
 * @throws {@link Error} naming the row that is not `sentence<TAB>0|1`
 */
export function sst2Rows(datasetsDir: string): { row: number; text: string; positive: boolean }[] {
  return lines(read(datasetsDir, "sst2", "dev.tsv"))
    .slice(1)
    .map((line, row) => {
      const [text, label] = line.split("\t");
      if (text === undefined || (label?.trim() !== "0" && label?.trim() !== "1"))
        throw new Error(`sst2/dev.tsv row ${row + 2}: expected "sentence<TAB>0|1"`);
      return { row, text: detokenizeSst(text), positive: label.trim() === "1" };
    });
}

/** The JSON lines of a SuperGLUE RTE or CB file under `superglue_rte_cb/`. */
export function superglue(
  datasetsDir: string,
  file: string,
): { idx: number; premise: string; hypothesis: string; label: string }[] {
  return lines(read(datasetsDir, "superglue_rte_cb", file)).map(
    (line) =>
      JSON.parse(line) as { idx: number; premise: string; hypothesis: string; label: string },
  );
}

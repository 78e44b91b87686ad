// Checks that every relative link and image in README.md and docs/**/*.md resolves: the file or
// folder exists, and a `#fragment` names a heading of the target page (GitHub's heading ids) or an
// HTML `id`/`name` in it. Links with a scheme (https:, mailto:) are not fetched. Code blocks and
// code spans are skipped: a path written in backticks is text, not a link.
//
// Usage: node scripts/check-links.mjs [FILE.md ...]   (default: README.md and docs/**/*.md)
// Exit status: 0 when every link resolves, 1 when one does not (each printed as file:line).
// Run by `npm run lint`.
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** README.md and every Markdown file under docs/, as absolute paths. */
function defaultFiles() {
  const docs = join(root, "docs");
  const pages = readdirSync(docs, { recursive: true })
    .map(String)
    .filter((name) => name.endsWith(".md"))
    .map((name) => join(docs, name));
  return [join(root, "README.md"), ...pages.sort()];
}

/** The lines of a Markdown file with fenced code blocks blanked; line numbers are kept. */
function unfencedLines(text) {
  let fence = null;
  return text.split("\n").map((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = null;
      return "";
    }
    if (marker) {
      fence = marker;
      return "";
    }
    return line;
  });
}

/** The lines with code blocks blanked and code spans removed: prose, where `[text](target)` is a link. */
function proseLines(text) {
  return unfencedLines(text).map((line) => line.replace(/(`+)(?:(?!\1).)+?\1/g, ""));
}

/** Every link target of a file, with its line: inline links and images, and reference definitions. */
function linksOf(text) {
  const links = [];
  proseLines(text).forEach((line, i) => {
    // [text](target) and ![alt](target); the text may hold one level of brackets (an image in a link).
    for (const m of line.matchAll(
      /!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g,
    ))
      links.push({ target: m[1], line: i + 1 });
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(line);
    if (definition) links.push({ target: definition[1], line: i + 1 });
  });
  return links;
}

/**
 * The heading ids GitHub gives a page: the heading's text lowercased, everything but letters,
 * digits, spaces, hyphens and underscores dropped, spaces turned into hyphens; a repeated id gets
 * `-1`, `-2`, … Also every `id="…"` and `name="…"` of HTML in the page.
 */
function anchorsOf(text) {
  const anchors = new Set();
  const seen = new Map();
  for (const line of unfencedLines(text)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const words = heading[1]
        .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // a link's text
        .replace(/<[^>]+>/g, "") // HTML tags
        .replace(/[*~`]/g, "")
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, "")
        .replace(/\s/g, "-");
      const count = seen.get(words) ?? 0;
      seen.set(words, count + 1);
      anchors.add(count === 0 ? words : `${words}-${count}`);
    }
    for (const m of line.matchAll(/\s(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  return anchors;
}

/** Why a link does not resolve, or `undefined` when it does. */
function problemOf(file, target) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto:: not fetched here
  const [pathPart, fragment] = target.split("#", 2);
  const path = decodeURI(pathPart.split("?")[0]);
  const resolved = path === "" ? file : resolve(dirname(file), path);
  if (path.startsWith("/")) return "an absolute path: write it relative to the page";
  if (!existsSync(resolved)) return `${relative(root, resolved)} does not exist`;
  if (fragment === undefined || fragment === "") return undefined;
  if (statSync(resolved).isDirectory() || !resolved.endsWith(".md")) return undefined;
  const anchors = anchorsOf(readFileSync(resolved, "utf8"));
  if (!anchors.has(decodeURIComponent(fragment)))
    return `${relative(root, resolved)} has no heading #${fragment}`;
  return undefined;
}

const files =
  process.argv.length > 2 ? process.argv.slice(2).map((f) => resolve(f)) : defaultFiles();
let checked = 0;
const broken = [];
for (const file of files) {
  for (const { target, line } of linksOf(readFileSync(file, "utf8"))) {
    checked += 1;
    const problem = problemOf(file, target);
    if (problem) broken.push(`${relative(root, file)}:${line}: (${target}) ${problem}`);
  }
}
const report = broken.length === 0 ? console.log : console.error;
for (const line of broken) report(line);
report(
  `check-links: ${checked} links in ${files.length} files, ${broken.length === 0 ? "all resolve" : `${broken.length} broken`}`,
);
process.exitCode = broken.length === 0 ? 0 : 1;

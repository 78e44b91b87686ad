import { closeSync, openSync, readSync, statSync } from "node:fs";

/** The first four bytes of every GGUF file. */
const GGUF_MAGIC = Buffer.from("GGUF", "latin1");

/**
 * Checks that `path` names a GGUF file before a loader reads it: it exists, is a file, and starts
 * with the magic `GGUF` (llama.cpp's own refusal quotes the file's first bytes and names no file).
 * @param path - the file, as resolved
 * @param what - what it is to be, for the message: "model", "adapter" or "projector"
 * @throws Error naming the file and what is wrong with it, never its content
 * @example checkGgufFile("/etc/passwd", "model") // throws: model file /etc/passwd is not a GGUF file …
 */
export function checkGgufFile(path: string, what: string): void {
  let size: number;
  try {
    const stat = statSync(path);
    if (stat.isDirectory()) throw new Error(`${what} file ${path} is a directory`);
    if (!stat.isFile()) throw new Error(`${what} file ${path} is not a regular file`);
    size = stat.size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      throw new Error(`no such ${what} file: ${path}`);
    throw error;
  }
  const head = Buffer.alloc(GGUF_MAGIC.length);
  const fd = openSync(path, "r");
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  if (size < GGUF_MAGIC.length || !head.equals(GGUF_MAGIC))
    throw new Error(
      `${what} file ${path} is not a GGUF file: it does not start with "GGUF" (give a .gguf file, e.g. one \`decisiond pull\` fetched)`,
    );
}

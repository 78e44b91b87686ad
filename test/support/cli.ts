import { Command } from "commander";
import { vi } from "vitest";

/**
 * Runs `decisiond <args>` in process with the commands `register` adds to a fresh program
 * (commander's exits turned into throws), capturing what it writes.
 * @returns everything written to stdout and to stderr
 * @throws what the command throws (a usage error as commander's `CommanderError`)
 * @example `const { stdout } = await runCommand(registerKeysCommand, ["keys", "list"]);`
 */
export async function runCommand(
  register: (program: Command) => void,
  args: readonly string[],
): Promise<{ stdout: string; stderr: string }> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const out = vi
    .spyOn(process.stdout, "write")
    .mockImplementation((s) => (stdout.push(String(s)), true));
  const err = vi
    .spyOn(process.stderr, "write")
    .mockImplementation((s) => (stderr.push(String(s)), true));
  try {
    const program = new Command().exitOverride();
    register(program);
    await program.parseAsync(["node", "decisiond", ...args]);
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
  return { stdout: stdout.join(""), stderr: stderr.join("") };
}

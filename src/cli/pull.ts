import type { Command } from "commander";
import { CATALOGUE, DEFAULT_MODEL, findModel } from "../models/catalogue.js";
import { pullEntry, pullModel } from "../models/pull.js";

/** Exit status of `decisiond pull` for a model name that is not in the catalogue. */
export const EXIT_UNKNOWN_MODEL = 2;

/** Exit status of `decisiond pull` when every source failed. */
export const EXIT_PULL_FAILED = 1;

/**
 * Adds `pull [name]` to a commander v14 program.
 *
 * `decisiond pull [name] [--home DIR]` downloads and verifies a catalogue model (default
 * {@link DEFAULT_MODEL}) into `<home>/models` and prints the file's absolute path on stdout;
 * progress and failures go to stderr. An unknown name prints the catalogue's names and exits
 * with status 2; a pull in which every source failed prints each source's failure and exits
 * with status 1. A vision-language model's projector is pulled too, and its path printed on a
 * second line.
 *
 * @returns the `pull` sub-command, for callers that want to adjust it.
 */
export function registerPullCommand(program: Command): Command {
  return program
    .command("pull")
    .description("download and verify a model from the catalogue")
    .argument(
      "[name]",
      `catalogue name (${CATALOGUE.map((e) => e.name).join(", ")})`,
      DEFAULT_MODEL,
    )
    .option(
      "--home <dir>",
      "decisiond home directory (default $DECISIOND_HOME or ~/.cache/decisiond)",
    )
    .action(async (name: string, opts: { home?: string }) => {
      if (!findModel(name)) {
        process.stderr.write(
          `decisiond pull: unknown model "${name}". Known models:\n` +
            CATALOGUE.map((e) => `  ${e.name}  ${e.description}\n`).join(""),
        );
        process.exitCode = EXIT_UNKNOWN_MODEL;
        return;
      }
      try {
        const path = await pullModel(name, { home: opts.home, progress: true });
        process.stdout.write(path + "\n");
        const mmproj = findModel(name)?.mmproj;
        if (mmproj)
          process.stdout.write(
            (await pullEntry(mmproj, { home: opts.home, progress: true })) + "\n",
          );
      } catch (err) {
        process.stderr.write(
          `decisiond pull: ${err instanceof Error ? err.message : String(err)}\n`,
        );
        process.exitCode = EXIT_PULL_FAILED;
      }
      // A hub transfer given up on may leave the downloader retrying in the background for
      // minutes (docs/decisions/052); the command's work is done, so it ends here.
      process.exit();
    });
}

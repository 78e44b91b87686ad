import type { Command } from "commander";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { DebiasMode } from "../decision/decide.js";
import { DEFAULT_MODEL, findModel } from "../models/catalogue.js";
import { ensureModel } from "../models/pull.js";
import { startService } from "../server.js";
import { byteSize, oneOf, port, positiveInt } from "./options.js";

/** Options of `decisiond serve` after parsing (flags win over environment variables). */
interface ServeFlags {
  host: string;
  port: number;
  model: string;
  contextSize?: number;
  threads?: number;
  parallel?: number;
  bodyLimit?: number;
  debias: DebiasMode;
  logLevel: string;
}

/**
 * Adds `serve`: start the HTTP service on a model, pulling the default model first when it is not
 * cached. Every flag has an environment variable (`DECISIOND_*`), listed in `--help`.
 */
export function registerServeCommand(program: Command): void {
  const env = process.env;
  program
    .command("serve")
    .description("serve POST /v1/systemone on a local model")
    .option("--host <host>", "address to bind (env DECISIOND_HOST)", env.DECISIOND_HOST ?? "127.0.0.1")
    .option("--port <port>", "port to listen on (env DECISIOND_PORT)", port, env.DECISIOND_PORT ? port(env.DECISIOND_PORT) : 8080)
    .option(
      "--model <name|path>",
      "catalogue model name, or path to a GGUF file (env DECISIOND_MODEL)",
      env.DECISIOND_MODEL ?? DEFAULT_MODEL,
    )
    .option("--context-size <tokens>", "tokens per request: prefix + longest question (env DECISIOND_CONTEXT_SIZE)", positiveInt, env.DECISIOND_CONTEXT_SIZE ? positiveInt(env.DECISIOND_CONTEXT_SIZE) : undefined)
    .option("--threads <n>", "CPU threads (env DECISIOND_THREADS; default: physical cores)", positiveInt, env.DECISIOND_THREADS ? positiveInt(env.DECISIOND_THREADS) : undefined)
    .option("--parallel <n>", "question branches evaluated side by side (env DECISIOND_PARALLEL; default 16)", positiveInt, env.DECISIOND_PARALLEL ? positiveInt(env.DECISIOND_PARALLEL) : undefined)
    .option("--body-limit <size>", "largest request body, e.g. 16MiB (env DECISIOND_BODY_LIMIT)", byteSize, env.DECISIOND_BODY_LIMIT ? byteSize(env.DECISIOND_BODY_LIMIT) : undefined)
    .option("--debias <mode>", "option-order debiasing: off, reverse or cyclic (env DECISIOND_DEBIAS)", oneOf<DebiasMode>("off", "reverse", "cyclic"), (env.DECISIOND_DEBIAS as DebiasMode | undefined) ?? "off")
    .option("--log-level <level>", "pino log level (env DECISIOND_LOG_LEVEL)", env.DECISIOND_LOG_LEVEL ?? "info")
    .action(async (flags: ServeFlags) => {
      const local = existsSync(flags.model) || flags.model.endsWith(".gguf");
      const entry = local ? undefined : findModel(flags.model);
      if (!local && !entry) {
        throw new Error(`unknown model "${flags.model}": give a catalogue name (decisiond pull --help) or a path to a .gguf file`);
      }
      const modelPath = local
        ? resolve(flags.model)
        : await ensureModel(flags.model, { progress: true });
      if (local && !existsSync(modelPath)) throw new Error(`no such model file: ${modelPath}`);
      const service = await startService({
        modelPath,
        ...(entry ? { modelId: entry.name, description: entry.description, releaseDate: entry.releaseDate } : {}),
        isDefault: entry?.name === DEFAULT_MODEL,
        host: flags.host,
        port: flags.port,
        ...(flags.contextSize ? { contextSize: flags.contextSize } : {}),
        ...(flags.threads ? { threads: flags.threads } : {}),
        ...(flags.parallel ? { parallelBranches: flags.parallel } : {}),
        ...(flags.bodyLimit ? { bodyLimit: flags.bodyLimit } : {}),
        debias: flags.debias,
        logger: { level: flags.logLevel },
      });
      process.stderr.write(
        `decisiond: serving ${service.engine.model.id} at ${service.url}/v1/systemone (context ${service.engine.model.contextSize} tokens)\n`,
      );
      const stop = () => {
        void service.close().then(() => process.exit(0));
      };
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
}

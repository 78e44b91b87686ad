import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { toolOverride } from "../protocol/paths.js";

/**
 * Where ffmpeg and ffprobe come from, in this order: the environment (`DECISIOND_FFMPEG`,
 * `DECISIOND_FFPROBE`, read by protocol/paths.ts `toolOverride`), the npm packages that ship static Linux x64 builds
 * (`@ffmpeg-installer/linux-x64`, `@ffprobe-installer/linux-x64`, optional dependencies), and the
 * system PATH.
 */
export function toolPath(tool: "ffmpeg" | "ffprobe"): string {
  const fromEnv = toolOverride(tool);
  if (fromEnv) return fromEnv;
  const pkg = tool === "ffmpeg" ? "@ffmpeg-installer/linux-x64" : "@ffprobe-installer/linux-x64";
  try {
    const dir = dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`));
    const binary = join(dir, tool);
    accessSync(binary, constants.X_OK);
    return binary;
  } catch {
    return tool;
  }
}

/** The output of a finished tool run. */
export interface ToolOutput {
  readonly stdout: Buffer;
  readonly stderr: string;
}

/**
 * Runs ffmpeg or ffprobe with `args` (no shell) and collects its output.
 * @throws {@link Error} when the tool is missing, exits non-zero (the message carries its last stderr
 *   line), or runs longer than `timeoutMs` (it is killed).
 */
export function runTool(
  tool: "ffmpeg" | "ffprobe",
  args: readonly string[],
  timeoutMs = 30_000,
): Promise<ToolOutput> {
  const binary = toolPath(tool);
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => {
      if (err.length < 65_536) err += chunk.toString("utf8");
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        error.code === "ENOENT"
          ? new Error(`${tool} is not installed (looked for ${binary})`)
          : error,
      );
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve({ stdout: Buffer.concat(out), stderr: err });
      const last = err.trim().split("\n").pop() ?? "";
      reject(
        new Error(
          signal === "SIGKILL"
            ? `${tool} took longer than ${timeoutMs} ms`
            : `${tool} failed${last ? `: ${last}` : ` (exit code ${code})`}`,
        ),
      );
    });
  });
}

/** Whether both tools run here (`-version` exits 0). */
export async function toolsAvailable(): Promise<boolean> {
  try {
    await runTool("ffprobe", ["-version"], 10_000);
    await runTool("ffmpeg", ["-version"], 10_000);
    return true;
  } catch {
    return false;
  }
}

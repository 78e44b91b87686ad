#!/usr/bin/env node
// `npm run conformance`: runs the community conformance suite jevcompat against decisiond.
//
// 1. Installs jevcompat and the official Python client (typesafe-sdk, with its zstd extra, so
//    its bodies of 1 KiB or more arrive zstd-compressed as they do on Python 3.14) into a venv
//    under .conformance/ (gitignored), once per pinned version.
// 2. Starts `decisiond serve` on the default model (fetched into the usual cache when missing)
//    with auth on, in a temporary DECISIOND_HOME and config directory, so the first-start key and
//    key file are made there and not in the user's; then creates a key for an account
//    "conformance" with `decisiond keys create`.
// 3. Runs `jevcompat test URL --key K --model jev-latest --json .conformance/report.json`,
//    prints every MUST and SHOULD requirement with its result and the usage ledger of the run,
//    and exits 1 when a MUST requirement failed (or was never exercised), else 0.
//
// Environment: CONFORMANCE_TIMEOUT (seconds per request, default 120), CONFORMANCE_KEEP=1 keeps
// the temporary home for inspection, DECISIOND_MODEL / any serve flag via DECISIOND_* variables.

import { execFileSync, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const WORK = join(ROOT, ".conformance");
const VENV = join(WORK, "venv");
const REQUIREMENTS = ["jevcompat==0.1.1", "typesafe-sdk[zstd]==0.7.5"];
const CLI = join(ROOT, "dist", "cli", "main.js");
const TIMEOUT = Number(process.env.CONFORMANCE_TIMEOUT ?? 120);

const log = (line) => process.stderr.write(`conformance: ${line}\n`);

/** The venv with the pinned packages; (re)installed when the pins changed. */
function ensureVenv() {
  const marker = join(VENV, ".decisiond-requirements");
  const wanted = REQUIREMENTS.join("\n");
  if (existsSync(marker) && readFileSync(marker, "utf8") === wanted) return;
  mkdirSync(WORK, { recursive: true });
  if (!existsSync(join(VENV, "bin", "python"))) {
    log(`creating a venv in ${VENV}`);
    execFileSync("python3", ["-m", "venv", VENV], { stdio: "inherit" });
  }
  log(`installing ${REQUIREMENTS.join(", ")}`);
  execFileSync(join(VENV, "bin", "python"), ["-m", "pip", "install", "--quiet", ...REQUIREMENTS], {
    stdio: "inherit",
  });
  writeFileSync(marker, wanted);
}

/** The default model's file, from the user's cache (downloaded there when missing). */
async function modelFile() {
  const { ensureModel } = await import(join(ROOT, "dist", "models", "pull.js"));
  const { DEFAULT_MODEL } = await import(join(ROOT, "dist", "models", "catalogue.js"));
  return {
    name: process.env.DECISIOND_MODEL ?? DEFAULT_MODEL,
    path: await ensureModel(process.env.DECISIOND_MODEL ?? DEFAULT_MODEL, { progress: false }),
  };
}

/** Starts `decisiond serve` on a free loopback port; resolves with its URL once it listens. */
function startServer(env) {
  const child = spawn(
    process.execPath,
    [CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--log-level", "warn"],
    {
      env,
      stdio: ["ignore", "inherit", "pipe"],
    },
  );
  return new Promise((resolve, reject) => {
    let seen = "";
    child.stderr.on("data", (chunk) => {
      const text = chunk.toString();
      // The first-start key is printed by serve; keep it out of the console.
      process.stderr.write(text.replace(/dsk_[0-9A-Za-z]{40}/g, "dsk_…(hidden)"));
      seen += text;
      const match = /serving .* at (http:\/\/\S+)\/v1\/systemone/.exec(seen);
      if (match) resolve({ child, url: match[1] });
    });
    child.on("exit", (code) =>
      reject(new Error(`decisiond serve exited with ${code} before listening`)),
    );
  });
}

function table(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => String(c).padEnd(widths[i]))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

async function main() {
  if (!existsSync(CLI))
    throw new Error("dist/ is missing: run npm run build first (npm run conformance does)");
  ensureVenv();
  const model = await modelFile();

  const home = mkdtempSync(join(tmpdir(), "decisiond-conformance-"));
  const env = {
    ...process.env,
    DECISIOND_HOME: join(home, "home"),
    XDG_CONFIG_HOME: join(home, "config"),
    DECISIOND_MODEL: model.name,
    DECISIOND_AUTH: "on",
  };
  // The model from the user's cache, seen from the temporary home (no second copy).
  const models = join(home, "home", "models");
  mkdirSync(models, { recursive: true });
  for (const file of [model.path, `${model.path}.verified.json`])
    if (existsSync(file)) symlinkSync(file, join(models, basename(file)));

  let server;
  try {
    const started = Date.now();
    server = await startServer(env);
    log(`decisiond is up at ${server.url} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    const key = execFileSync(
      process.execPath,
      [CLI, "keys", "create", "--account", "conformance", "--label", "jevcompat"],
      {
        env,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      },
    ).trim();

    const report = join(WORK, "report.json");
    rmSync(report, { force: true });
    const t0 = Date.now();
    const run = spawn(
      join(VENV, "bin", "jevcompat"),
      [
        "test",
        server.url,
        "--key-env",
        "JEVCOMPAT_KEY",
        "--model",
        "jev-latest",
        "--json",
        report,
        "--markdown",
        join(WORK, "report.md"),
        "--timeout",
        String(TIMEOUT),
      ],
      { env: { ...env, JEVCOMPAT_KEY: key }, stdio: "inherit" },
    );
    const code = await new Promise((resolve) => run.on("exit", resolve));
    const seconds = (Date.now() - t0) / 1000;
    log(`jevcompat exited with ${code} after ${seconds.toFixed(0)} s`);
    if (!existsSync(report)) throw new Error("jevcompat wrote no report");

    const { rows, problems, verdict, must, should } = summarize(
      JSON.parse(readFileSync(report, "utf8")),
    );
    process.stdout.write(`\n${table([["level", "requirement", "result", "note"], ...rows])}\n\n`);
    process.stdout.write(
      execFileSync(process.execPath, [CLI, "usage", "--account", "conformance"], {
        env,
        encoding: "utf8",
      }) + "\n",
    );
    log(`report: ${report} (and report.md); ${seconds.toFixed(0)} s`);
    log(
      `jevcompat verdict: ${verdict}; MUST ${must.passed}/${must.tested} passed (${must.skipped} not applicable), ` +
        `SHOULD ${should.passed}/${should.tested} passed (${should.skipped} not exercised)`,
    );
    if (problems.length > 0) {
      for (const p of problems) log(p);
      process.exitCode = 1;
    } else log("every MUST requirement passed");
  } finally {
    server?.child.kill("SIGTERM");
    if (process.env.CONFORMANCE_KEEP) log(`kept ${home}`);
    else rmSync(home, { recursive: true, force: true });
  }
}

/**
 * Rows (level, id, result, note) from jevcompat's JSON report, MUST first, and why the run fails:
 * a MUST requirement failed or went untested, or the run was aborted or inconclusive (time-outs).
 * A requirement jevcompat skips as not applicable (e.g. auth.ignored-when-off, with auth on) is
 * listed, not counted against the server, as jevcompat does.
 */
function summarize(report) {
  const rows = [];
  for (const level of ["MUST", "SHOULD"])
    for (const r of report.results.filter((x) => x.level === level)) {
      const note = r.findings?.[0]
        ? `${r.findings[0].case}: ${r.findings[0].message}`
        : (r.reason ?? "");
      rows.push([level, r.id, r.status, note.replace(/\s+/g, " ").slice(0, 110)]);
    }
  const problems = [];
  const must = report.summary?.MUST ?? {};
  if (must.failed > 0)
    problems.push(
      `MUST failed: ${report.results
        .filter((r) => r.level === "MUST" && r.status === "fail")
        .map((r) => r.id)
        .join(", ")}`,
    );
  if (report.summary?.untested_musts?.length)
    problems.push(`MUST untested: ${report.summary.untested_musts.join(", ")}`);
  if (report.aborted) problems.push(`run aborted: ${report.aborted}`);
  if (report.inconclusive?.length)
    problems.push(`inconclusive: ${JSON.stringify(report.inconclusive).slice(0, 300)}`);
  if (report.case_errors?.length)
    problems.push(`case errors: ${JSON.stringify(report.case_errors).slice(0, 300)}`);
  return {
    rows,
    problems,
    verdict: report.summary?.verdict,
    must,
    should: report.summary?.SHOULD ?? {},
  };
}

main().catch((error) => {
  log(error instanceof Error ? error.message : String(error));
  process.exitCode = 1;
});

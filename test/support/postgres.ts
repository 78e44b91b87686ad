import { execFile, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { chmod, chown, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { stopOnExit } from "./cleanup.js";

/**
 * A real PostgreSQL for tests: Debian's `postgresql` package (installed by `.ci/run` when
 * missing), a cluster in a temporary data directory on a free loopback port, its unix socket in
 * that directory, run as the `postgres` user when the tests run as root (the server refuses root).
 */

const run = promisify(execFile);

/** A running test cluster. */
export interface TestPostgres {
  /** `postgres://decisiond@127.0.0.1:PORT/`, without a database name. */
  readonly baseUrl: string;
  readonly port: number;
  /** Creates an empty database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server (fast shutdown: sessions are cut, as in a failover); {@link start} brings it back. */
  halt(): Promise<void>;
  /** Starts a halted server again on the same port and data. */
  start(): Promise<void>;
  /** Stops the server at once and deletes its data directory. */
  stop(): Promise<void>;
}

/** The directory of `initdb` and `pg_ctl`: the newest `/usr/lib/postgresql/N/bin`. */
export function postgresBinDir(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "pg_ctl")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0)
    throw new Error(
      "PostgreSQL is not installed: apt-get install -y postgresql (Debian's package; .ci/run does it)",
    );
  return join(root, versions[0]!, "bin");
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** Starts a fresh cluster (a few seconds). Call `stop()` when done. */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = postgresBinDir();
  const dir = await mkdtemp(join(tmpdir(), "decisiond-pg-"));
  const root = process.getuid?.() === 0;
  // stdio ignored: the server pg_ctl starts would hold piped output open, and execFile would wait.
  const as = async (file: string, args: string[]) => {
    const command = root ? "runuser" : join(bin, file);
    const argv = root ? ["-u", "postgres", "--", join(bin, file), ...args] : args;
    const child = spawn(command, argv, { cwd: dir, stdio: "ignore" });
    const [code] = (await once(child, "exit")) as [number | null];
    if (code !== 0) throw new Error(`${file} ${args.join(" ")} exited with ${code} (see ${dir})`);
  };
  if (root) {
    const { stdout } = await run("id", ["-u", "postgres"]);
    const { stdout: gid } = await run("id", ["-g", "postgres"]);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
    await chmod(dir, 0o700);
  }
  const data = join(dir, "data");
  await as("initdb", ["-D", data, "-U", "decisiond", "-A", "trust", "--no-sync", "-E", "UTF8"]);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    "-c listen_addresses=127.0.0.1",
    "-c fsync=off",
    "-c synchronous_commit=off",
    "-c full_page_writes=off",
    "-c max_connections=300",
  ].join(" ");
  const start = () =>
    as("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "server.log"), "-w", "start"]);
  // pg_ctl daemonizes the server: a run that is interrupted must stop it by itself.
  const forget = stopOnExit(() => {
    const command = root ? "runuser" : join(bin, "pg_ctl");
    const argv = ["-D", data, "-m", "immediate", "stop"];
    spawnSync(command, root ? ["-u", "postgres", "--", join(bin, "pg_ctl"), ...argv] : argv, {
      stdio: "ignore",
      timeout: 10_000,
    });
    rmSync(dir, { recursive: true, force: true });
  });
  await start();
  const baseUrl = `postgres://decisiond@127.0.0.1:${port}/`;
  return {
    baseUrl,
    port,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: `${baseUrl}postgres` });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name.replace(/"/g, "")}"`);
      } finally {
        await client.end();
      }
      return `${baseUrl}${name}`;
    },
    halt: () => as("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]),
    start,
    async stop() {
      forget();
      await as("pg_ctl", ["-D", data, "-m", "immediate", "stop"]).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

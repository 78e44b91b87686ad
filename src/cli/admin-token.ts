import { readFileSync } from "node:fs";
import { checkAdminToken } from "../console/plugin.js";

/**
 * The console's admin token: the content of `--admin-token-file` (one trailing newline dropped),
 * else `DECISIOND_ADMIN_TOKEN`; `undefined` when neither is given (admin sign-in off).
 * @throws Error for an empty `DECISIOND_ADMIN_TOKEN`, an unreadable file or a weak token (see {@link checkAdminToken}).
 */
export function readAdminToken(
  flags: { readonly adminTokenFile?: string },
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  let token: string | undefined;
  if (env.DECISIOND_ADMIN_TOKEN === "")
    throw new Error("DECISIOND_ADMIN_TOKEN is empty: set the token, or leave it unset");
  if (flags.adminTokenFile !== undefined) {
    try {
      token = readFileSync(flags.adminTokenFile, "utf8").replace(/\r?\n$/, "");
    } catch (error) {
      throw new Error(
        `cannot read the admin token file ${flags.adminTokenFile}: ${(error as Error).message}`,
      );
    }
  } else if (env.DECISIOND_ADMIN_TOKEN) token = env.DECISIOND_ADMIN_TOKEN;
  return token === undefined ? undefined : checkAdminToken(token);
}

import type { FastifyInstance, FastifyRequest } from "fastify";
import { StoreError, type AccountStore } from "../accounts/store.js";
import { quoteName } from "../accounts/rows.js";
import { ApiError, Errors, validationError } from "../protocol/errors.js";
import { accountInScope, authenticate, keyInScope, type Principal } from "./auth.js";
import { acceptEmptyJsonBody } from "./no-body.js";
import { CreateKeyBody, KeyParams, KeysQuery, NoBody, parseOr422, UsageQuery } from "./schemas.js";
import { accountView, allowanceView, dayViews, keyView } from "./views.js";

/** Who signed in to a console request, and the store their accounts are in. */
interface ConsoleSession {
  readonly store: AccountStore;
  readonly principal: Principal;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The console's signed-in session; `null` outside the console's signed-in routes. */
    consoleSession: ConsoleSession | null;
  }
}

/** The session of a request of a signed-in route (its `onRequest` hook set it). */
const signedIn = (request: FastifyRequest): ConsoleSession => request.consoleSession!;

/**
 * The console's JSON API, mounted at `/console/api`. Every route but `GET /config` needs
 * `Authorization: Bearer <API key | admin token>` (see ./auth.ts); a key principal reaches its
 * own account only. Errors have the API's shapes: 401/403/404 `{"detail": {error_type, message}}`,
 * 422 `{"detail": [{loc, msg, type}]}`.
 *
 * | route                        | does                                                            |
 * | ---------------------------- | --------------------------------------------------------------- |
 * | `GET /config`                | `{auth, admin_sign_in}`: what sign-in the server offers (public) |
 * | `GET /session`               | who the credential is: `{role: "admin"}` or `{role: "account", account, key}` |
 * | `GET /accounts`              | accounts in scope, with allowance and active key count          |
 * | `GET /keys?account=`         | keys in scope (admin: all, or one account's)                    |
 * | `POST /keys`                 | `{account?, label?}` → 201 the new key, shown this once         |
 * | `POST /keys/:id/revoke`      | revokes a key in scope (no body: empty or `{}`; others are 422) |
 * | `GET /usage?account=&days=`  | calls and tokens per UTC day, totals, allowance left            |
 */

/** Options of {@link consoleApi}. */
export interface ConsoleApiOptions {
  /** The accounts store; `undefined` when the server runs without accounts (`--auth off`). */
  readonly store: AccountStore | undefined;
  /** The admin token; `undefined` turns admin sign-in off. */
  readonly adminToken: string | undefined;
  /** The clock. Default `Date.now`. */
  readonly now?: () => number;
}

/** Registers the console API routes on `app` (expected under the prefix `/console/api`). */
export async function consoleApi(app: FastifyInstance, options: ConsoleApiOptions): Promise<void> {
  const { store, adminToken } = options;
  const now = options.now ?? Date.now;

  // Answers carry credentials and keys: never cached.
  app.addHook("onSend", async (_request, reply, payload) => {
    reply.header("cache-control", "no-store");
    return payload;
  });

  app.get("/config", async () => ({
    auth: store !== undefined,
    admin_sign_in: store !== undefined && adminToken !== undefined,
  }));

  // Every other route authenticates in onRequest, before its body is read or decompressed: a
  // request without a valid credential costs no upload, decompression or parse. The session
  // lives on the request (`request.consoleSession`), declared in this scope only.
  await app.register(async (signed) => {
    signed.decorateRequest("consoleSession", null);
    signed.addHook("onRequest", async (request) => {
      if (!store) throw new ApiError(Errors.accountsOff);
      const principal = await authenticate(request.headers.authorization, {
        store,
        adminToken,
      }).catch((error: unknown) => {
        // A wrong admin token is logged at warn, for an operator to alert on guessing (the
        // token is at least 24 characters; nothing throttles here).
        if (error instanceof ApiError && error.spec === Errors.invalidCredential)
          request.log.warn({ remote: request.ip }, "console: a wrong admin token was refused");
        throw error;
      });
      request.consoleSession = { store, principal };
    });

    signed.get("/session", async (request) => {
      const { principal } = signedIn(request);
      return principal.role === "admin"
        ? { role: "admin" }
        : { role: "account", account: principal.account.name, key: keyView(principal.key) };
    });

    signed.get("/accounts", async (request) => {
      const { store, principal } = signedIn(request);
      const accounts =
        principal.role === "admin"
          ? await store.listAccounts()
          : [(await store.accountById(principal.account.id))!];
      return {
        accounts: await Promise.all(
          accounts.map(async (account) =>
            accountView(
              account,
              await store.allowanceState(account),
              (await store.listKeys(account.name)).filter((k) => k.revokedAt === undefined).length,
            ),
          ),
        ),
      };
    });

    signed.get("/keys", async (request) => {
      const { store, principal } = signedIn(request);
      const query = parseOr422(KeysQuery, request.query, "query");
      const account = accountInScope(principal, query.account, {
        loc: ["query", "account"],
        required: false,
      });
      if (account !== undefined && !(await store.findAccount(account)))
        throw new ApiError(Errors.accountNotFound, [quoteName(account)]);
      return { keys: (await store.listKeys(account)).map(keyView) };
    });

    signed.post("/keys", async (request, reply) => {
      const { store, principal } = signedIn(request);
      const body = parseOr422(CreateKeyBody, request.body, "body");
      const account = accountInScope(principal, body.account, {
        loc: ["body", "account"],
        required: true,
      })!;
      let created;
      try {
        // The admin may name a new account: it is created, as `decisiond keys create` does.
        created = await store.createKey(account, body.label);
      } catch (error) {
        if (error instanceof StoreError)
          throw validationError([
            { loc: ["body", "account"], msg: error.message, type: "value_error" },
          ]);
        throw error;
      }
      request.log.info(
        { key: created.record.prefix, account, by: principal.role },
        "console: key created",
      );
      void reply.code(201);
      return {
        ...keyView(created.record),
        key: created.key,
        account_created: created.accountCreated,
      };
    });

    // Takes no body: an empty one sent as application/json is none.
    await signed.register(async (bodyless) => {
      acceptEmptyJsonBody(bodyless);
      bodyless.post("/keys/:id/revoke", async (request) => {
        const { store, principal } = signedIn(request);
        const { id } = parseOr422(KeyParams, request.params, "path");
        parseOr422(NoBody, request.body, "body");
        await keyInScope(principal, store, id);
        const { record, alreadyRevoked } = await store.revokeKey(id);
        request.log.info(
          { key: record.prefix, account: record.accountName, by: principal.role },
          "console: key revoked",
        );
        return { ...keyView(record), already_revoked: alreadyRevoked };
      });
    });

    signed.get("/usage", async (request) => {
      const { store, principal } = signedIn(request);
      const query = parseOr422(UsageQuery, request.query, "query");
      const name = accountInScope(principal, query.account, {
        loc: ["query", "account"],
        required: true,
      })!;
      const account = await store.findAccount(name);
      if (!account) throw new ApiError(Errors.accountNotFound, [quoteName(name)]);
      const at = now();
      const since = at - (query.days - 1) * 86_400_000;
      const days = dayViews(await store.dailyUsage(account.id, since), at, query.days);
      const [all] = await store.usage(name);
      return {
        account: name,
        days,
        window: {
          calls: sum(days, "calls"),
          failed_calls: sum(days, "failed_calls"),
          input_tokens: sum(days, "input_tokens"),
          output_tokens: sum(days, "output_tokens"),
        },
        all_time: {
          calls: all!.calls,
          failed_calls: all!.failedCalls,
          input_tokens: all!.inputTokens,
          output_tokens: all!.outputTokens,
        },
        allowance: allowanceView(await store.allowanceState(account)),
      };
    });
  });
}

function sum<K extends string>(rows: readonly Record<K, number>[], key: K): number {
  return rows.reduce((total, row) => total + row[key], 0);
}

import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import { Link, Redirect, Route, Router, Switch, useRoute } from "wouter-preact";
import { consoleApi, fetchConfig, type ConfigView, type SessionView } from "./api";
import { toApiError } from "./hooks";
import { KeysPage } from "./pages/keys";
import { PlaygroundPage } from "./pages/playground";
import { SignInPage } from "./pages/sign-in";
import { UsagePage } from "./pages/usage";
import {
  forgetCredentials,
  SessionContext,
  storeCredential,
  storedCredential,
  type Session,
  useSession,
} from "./session";

type Boot =
  | { state: "loading" }
  | { state: "failed"; message: string }
  | { state: "signed-out"; config: ConfigView; reason: string | undefined }
  | { state: "signed-in"; config: ConfigView; who: SessionView | null; credential: string | null };

/** The console: sign-in, then the API keys, usage and playground pages under /console/. */
export function App() {
  const [boot, setBoot] = useState<Boot>({ state: "loading" });

  const signOut = useCallback((reason?: string) => {
    forgetCredentials();
    setBoot((b) =>
      b.state === "signed-in" || b.state === "signed-out"
        ? { state: "signed-out", config: b.config, reason }
        : b,
    );
  }, []);

  useEffect(() => {
    void (async () => {
      let config: ConfigView;
      try {
        config = await fetchConfig();
      } catch (e) {
        setBoot({ state: "failed", message: toApiError(e).message });
        return;
      }
      if (!config.auth) {
        setBoot({ state: "signed-in", config, who: null, credential: null });
        return;
      }
      const credential = storedCredential();
      if (!credential) {
        setBoot({ state: "signed-out", config, reason: undefined });
        return;
      }
      try {
        const who = await consoleApi(credential).session();
        setBoot({ state: "signed-in", config, who, credential });
      } catch (e) {
        forgetCredentials();
        setBoot({ state: "signed-out", config, reason: toApiError(e).message });
      }
    })();
  }, []);

  const signIn = useCallback(
    async (credential: string) => {
      if (boot.state !== "signed-out") return;
      const who = await consoleApi(credential).session();
      storeCredential(credential);
      setBoot({ state: "signed-in", config: boot.config, who, credential });
    },
    [boot],
  );

  const session = useMemo<Session | null>(
    () =>
      boot.state === "signed-in"
        ? {
            config: boot.config,
            who: boot.who,
            credential: boot.credential,
            api: consoleApi(boot.credential),
            signOut,
          }
        : null,
    [boot, signOut],
  );

  if (boot.state === "loading")
    return (
      <main class="centered">
        <p class="muted">Loading…</p>
      </main>
    );
  if (boot.state === "failed")
    return (
      <main class="centered">
        <p class="error" role="alert">
          {boot.message}
        </p>
      </main>
    );
  if (boot.state === "signed-out")
    return <SignInPage config={boot.config} reason={boot.reason} onSignIn={signIn} />;

  return (
    <SessionContext.Provider value={session}>
      <Router base="/console">
        <Shell>
          <Switch>
            <Route path="/">
              <Redirect to={boot.config.auth ? "/keys" : "/playground"} replace />
            </Route>
            <Route path="/keys" component={KeysPage} />
            <Route path="/usage" component={UsagePage} />
            <Route path="/playground" component={PlaygroundPage} />
            <Route>
              <section class="page">
                <h1>Not found</h1>
                <p>
                  There is no such page. <Link href="/keys">Go to API keys</Link>.
                </p>
              </section>
            </Route>
          </Switch>
        </Shell>
      </Router>
    </SessionContext.Provider>
  );
}

function NavLink({ href, children }: { href: string; children: string }) {
  const [active] = useRoute(href);
  return (
    <Link
      href={href}
      class={active ? "nav-link active" : "nav-link"}
      aria-current={active ? "page" : undefined}
    >
      {children}
    </Link>
  );
}

/** Header (who is signed in, sign out), navigation, and the page. */
function Shell({ children }: { children: ComponentChildren }) {
  const session = useSession();
  const who = session.who;
  return (
    <>
      <header class="top">
        <div class="top-row">
          <a class="brand" href="/console/">
            <img src="/console/favicon.svg" alt="" width="24" height="24" />
            decisiond <span>console</span>
          </a>
          <div class="who">
            {who === null ? (
              <span class="badge">auth off</span>
            ) : who.role === "admin" ? (
              <span class="badge admin" data-testid="who">
                admin
              </span>
            ) : (
              <span class="badge" data-testid="who" title={`signed in with ${who.key.prefix}…`}>
                {who.account}
              </span>
            )}
            {who !== null && (
              <button type="button" class="link-button" onClick={() => session.signOut()}>
                Sign out
              </button>
            )}
          </div>
        </div>
        <nav class="tabs" aria-label="Console pages">
          <NavLink href="/keys">API keys</NavLink>
          <NavLink href="/usage">Usage</NavLink>
          <NavLink href="/playground">Playground</NavLink>
        </nav>
      </header>
      <main>{children}</main>
    </>
  );
}

import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { ConfigView, ConsoleApi, SessionView } from "./api";

/**
 * The signed-in session: the credential (an API key or the admin token), kept in this tab's
 * sessionStorage only, so it is gone when the tab closes and never sent anywhere but this server.
 */

const CREDENTIAL = "decisiond.console.credential";
const PLAYGROUND_KEY = "decisiond.console.playground-key";

export const storedCredential = () => sessionStorage.getItem(CREDENTIAL);
export const storeCredential = (credential: string) =>
  sessionStorage.setItem(CREDENTIAL, credential);

/** The key the playground calls /v1/systemone with when the admin is signed in. */
export const storedPlaygroundKey = () => sessionStorage.getItem(PLAYGROUND_KEY);
export const storePlaygroundKey = (key: string | null) =>
  key === null
    ? sessionStorage.removeItem(PLAYGROUND_KEY)
    : sessionStorage.setItem(PLAYGROUND_KEY, key);

export const forgetCredentials = () => {
  sessionStorage.removeItem(CREDENTIAL);
  sessionStorage.removeItem(PLAYGROUND_KEY);
};

/** What every page knows of the session. */
export interface Session {
  readonly config: ConfigView;
  /** `null` when the server runs without accounts (--auth off). */
  readonly who: SessionView | null;
  readonly credential: string | null;
  readonly api: ConsoleApi;
  /** Signs out, optionally saying why on the sign-in page. */
  signOut(reason?: string): void;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error("useSession outside a signed-in session");
  return session;
}

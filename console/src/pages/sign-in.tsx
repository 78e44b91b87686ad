import { useState } from "preact/hooks";
import type { ConfigView } from "../api";
import { toApiError } from "../hooks";

/** Sign-in with an API key (its own account) or the admin token (every account). */
export function SignInPage(props: {
  config: ConfigView;
  reason: string | undefined;
  onSignIn(credential: string): Promise<void>;
}) {
  const [credential, setCredential] = useState("");
  const [shown, setShown] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();

  const submit = async (event: Event) => {
    event.preventDefault();
    const value = credential.trim();
    if (value === "") {
      setError("Paste an API key or the admin token.");
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      await props.onSignIn(value);
    } catch (e) {
      setError(toApiError(e).message);
      setBusy(false);
    }
  };

  const message = error ?? props.reason;
  return (
    <main class="centered">
      <form class="card sign-in" onSubmit={submit} aria-labelledby="sign-in-title">
        <div class="brand">
          <img src="/console/favicon.svg" alt="" width="28" height="28" />
          decisiond <span>console</span>
        </div>
        <h1 id="sign-in-title">Sign in</h1>
        <label for="credential">
          {props.config.admin_sign_in ? "API key or admin token" : "API key"}
        </label>
        <div class="input-row">
          <input
            id="credential"
            name="credential"
            type={shown ? "text" : "password"}
            autocomplete="off"
            spellcheck={false}
            placeholder="dsk_…"
            value={credential}
            onInput={(e) => setCredential(e.currentTarget.value)}
            aria-invalid={message !== undefined}
            aria-describedby={message !== undefined ? "sign-in-error" : undefined}
          />
          <button
            type="button"
            class="secondary"
            onClick={() => setShown(!shown)}
            aria-pressed={shown}
          >
            {shown ? "Hide" : "Show"}
          </button>
        </div>
        {message !== undefined && (
          <p id="sign-in-error" class="error" role="alert">
            {message}
          </p>
        )}
        <button type="submit" class="primary wide" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        <p class="hint">
          An API key manages its own account: its keys, its usage, the playground.
          {props.config.admin_sign_in
            ? " The admin token manages every account."
            : " Admin sign-in is off on this server (no DECISIOND_ADMIN_TOKEN)."}{" "}
          The credential stays in this tab only and is forgotten when you close it or sign out.
        </p>
      </form>
    </main>
  );
}

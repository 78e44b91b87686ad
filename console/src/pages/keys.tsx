import { useRef, useState } from "preact/hooks";
import { useLocation } from "wouter-preact";
import type { CreatedKey, KeyView } from "../api";
import { AccountPicker } from "../components/account-picker";
import { ConfirmDialog } from "../components/confirm-dialog";
import { CopyButton } from "../components/copy-button";
import { formatTime } from "../format";
import { toApiError, useLoad } from "../hooks";
import { storePlaygroundKey, useSession } from "../session";

/** API keys: create (shown once, with a copy button), list, revoke with a confirmation. */
export function KeysPage() {
  const session = useSession();
  const { who, api } = session;
  const admin = who?.role === "admin";
  const [filter, setFilter] = useState("");
  const accounts = useLoad(() => (admin ? api.accounts() : Promise.resolve(undefined)), [api]);
  const keys = useLoad(() => api.keys(admin && filter !== "" ? filter : undefined), [api, filter]);
  const [created, setCreated] = useState<CreatedKey>();
  const [revoking, setRevoking] = useState<KeyView>();
  const [revokeBusy, setRevokeBusy] = useState(false);
  const [revokeError, setRevokeError] = useState<string>();

  if (who === null)
    return (
      <section class="page">
        <h1>API keys</h1>
        <p class="notice">
          This server runs without accounts (<code>--auth off</code>): requests need no key. Start
          it with <code>--auth on</code> to manage keys.
        </p>
      </section>
    );

  const signedInKeyId = who.role === "account" ? who.key.id : undefined;

  const revoke = async () => {
    if (!revoking) return;
    setRevokeBusy(true);
    setRevokeError(undefined);
    try {
      await api.revokeKey(revoking.id);
      if (revoking.id === signedInKeyId) {
        session.signOut(`You revoked the key you were signed in with (${revoking.prefix}…).`);
        return;
      }
      setRevoking(undefined);
      keys.reload();
      accounts.reload();
    } catch (e) {
      const error = toApiError(e);
      if (error.status === 401) session.signOut(error.message);
      setRevokeError(error.message);
    } finally {
      setRevokeBusy(false);
    }
  };

  return (
    <section class="page">
      <div class="page-head">
        <h1>API keys</h1>
        <p class="muted">
          {admin
            ? "Every account's keys. Keys are stored as SHA-256 hashes: a key is shown once, when it is created."
            : `Keys of account “${who.account}”. A key is shown once, when it is created.`}
        </p>
      </div>

      <CreateKeyForm
        accounts={accounts.data?.map((a) => a.name)}
        onCreated={(key) => {
          setCreated(key);
          keys.reload();
          accounts.reload();
        }}
      />

      {created && <NewKey created={created} onDone={() => setCreated(undefined)} />}

      <div class="card">
        <div class="card-head">
          <h2>Keys</h2>
          {admin && (
            <AccountPicker
              id="keys-account"
              accounts={accounts.data}
              value={filter}
              allLabel="All accounts"
              onChange={setFilter}
            />
          )}
        </div>
        {keys.error && keys.error.status !== 401 && (
          <p class="error" role="alert">
            {keys.error.message}
          </p>
        )}
        {keys.data && keys.data.length === 0 && <p class="muted">No keys yet.</p>}
        {keys.data && keys.data.length > 0 && (
          <table class="keys responsive" data-testid="keys-table">
            <thead>
              <tr>
                <th scope="col">Prefix</th>
                <th scope="col">Label</th>
                {admin && <th scope="col">Account</th>}
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {[...keys.data].reverse().map((k) => (
                <tr key={k.id} data-key-prefix={k.prefix} class={k.revoked_at ? "revoked" : ""}>
                  <td data-label="Prefix">
                    <code>{k.prefix}…</code>
                    {k.id === signedInKeyId && <span class="badge small">this session</span>}
                  </td>
                  <td data-label="Label" class="wrap">
                    {k.label ?? <span class="muted">—</span>}
                  </td>
                  {admin && (
                    <td data-label="Account" class="wrap">
                      {k.account}
                    </td>
                  )}
                  <td data-label="Created">{formatTime(k.created_at)}</td>
                  <td data-label="Last used">{formatTime(k.last_used_at)}</td>
                  <td data-label="Status">
                    {k.revoked_at ? (
                      <span class="status revoked">revoked {formatTime(k.revoked_at)}</span>
                    ) : (
                      <span class="status active">active</span>
                    )}
                  </td>
                  <td class="actions">
                    {!k.revoked_at && (
                      <button
                        type="button"
                        class="danger small"
                        onClick={() => {
                          setRevokeError(undefined);
                          setRevoking(k);
                        }}
                        aria-label={`Revoke key ${k.prefix}…`}
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>

      <ConfirmDialog
        open={revoking !== undefined}
        title="Revoke this key?"
        confirmLabel="Revoke key"
        busy={revokeBusy}
        onCancel={() => setRevoking(undefined)}
        onConfirm={revoke}
      >
        {revoking && (
          <>
            <p class="wrap">
              <code>{revoking.prefix}…</code>
              {revoking.label ? ` (${revoking.label})` : ""} of account “{revoking.account}”.
              Requests with it get 401 from now on. This cannot be undone.
            </p>
            {revoking.id === signedInKeyId && (
              <p class="warning">This is the key you are signed in with: you will be signed out.</p>
            )}
            {revokeError && (
              <p class="error" role="alert">
                {revokeError}
              </p>
            )}
          </>
        )}
      </ConfirmDialog>
    </section>
  );
}

/** The form that creates a key: the admin names the account (created when missing). */
function CreateKeyForm(props: {
  accounts: string[] | undefined;
  onCreated(key: CreatedKey): void;
}) {
  const { who, api, signOut } = useSession();
  const admin = who?.role === "admin";
  const [account, setAccount] = useState("");
  const [label, setLabel] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const created = await api.createKey({
        ...(admin ? { account: account.trim() } : {}),
        ...(label.trim() !== "" ? { label: label.trim() } : {}),
      });
      setLabel("");
      props.onCreated(created);
    } catch (e) {
      const failure = toApiError(e);
      if (failure.status === 401) signOut(failure.message);
      setError(
        failure.details.length > 0 ? failure.details.map((d) => d.msg).join("; ") : failure.message,
      );
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card create-key" onSubmit={submit}>
      <h2>Create a key</h2>
      <div class="form-row">
        {admin && (
          <div class="field">
            <label for="new-key-account">Account</label>
            <input
              id="new-key-account"
              list="account-names"
              required
              autocomplete="off"
              placeholder="account name, e.g. acme"
              value={account}
              onInput={(e) => {
                setAccount(e.currentTarget.value);
                setError(undefined);
              }}
            />
            <datalist id="account-names">
              {(props.accounts ?? []).map((name) => (
                <option key={name} value={name} />
              ))}
            </datalist>
          </div>
        )}
        <div class="field grow">
          <label for="new-key-label">
            Label <span class="muted">(optional)</span>
          </label>
          <input
            id="new-key-label"
            maxLength={100}
            autocomplete="off"
            placeholder="who holds it, e.g. ci"
            value={label}
            onInput={(e) => {
              setLabel(e.currentTarget.value);
              setError(undefined);
            }}
          />
        </div>
        {/* A click (Enter in a field clicks it too) clears the last refusal even when the
            browser's own checks (a required account) stop the submit. */}
        <button type="submit" class="primary" disabled={busy} onClick={() => setError(undefined)}>
          {busy ? "Creating…" : "Create key"}
        </button>
      </div>
      {admin && (
        <p class="hint">An account that does not exist yet is created with its first key.</p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}

/** A key just created: shown this once, with copy and "use in the playground". */
function NewKey(props: { created: CreatedKey; onDone(): void }) {
  const input = useRef<HTMLInputElement>(null);
  const [, navigate] = useLocation();
  const { created } = props;
  return (
    <div class="card new-key" role="status" aria-labelledby="new-key-title">
      <h2 id="new-key-title">
        New key for “{created.account}”{created.account_created ? " (new account)" : ""}
      </h2>
      <p>
        Copy it now: it is <strong>shown only this once</strong>. decisiond keeps only its hash.
      </p>
      <div class="input-row">
        <input
          ref={input}
          readOnly
          class="mono"
          value={created.key}
          aria-label="The new API key"
          data-testid="new-key"
          onFocus={(e) => e.currentTarget.select()}
        />
        <CopyButton text={created.key} fallbackInput={() => input.current} />
      </div>
      <div class="actions-row">
        <button
          type="button"
          class="secondary"
          onClick={() => {
            storePlaygroundKey(created.key);
            navigate("/playground");
          }}
        >
          Use in playground
        </button>
        <button type="button" class="primary" onClick={props.onDone}>
          Done
        </button>
      </div>
    </div>
  );
}

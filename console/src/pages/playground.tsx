import { useEffect, useRef, useState } from "preact/hooks";
import { decide, fetchModels, type ApiError, type DecisionResponse } from "../api";
import { AccountPicker } from "../components/account-picker";
import { AnswerCard } from "../components/answer-card";
import { JsonEditor } from "../components/json-editor";
import { QuestionEditor } from "../components/question-editor";
import { formatNumber } from "../format";
import { toApiError, useLoad } from "../hooks";
import {
  EXAMPLE_STATE,
  exampleQuestions,
  MAX_QUESTIONS,
  newQuestion,
  parseState,
  questionsBody,
  type QuestionDraft,
} from "../playground-model";
import { storedPlaygroundKey, storePlaygroundKey, useSession } from "../session";

const DRAFT = "decisiond.console.playground-draft";

/** The drafts of this tab, kept across page changes and reloads. */
function loadDraft(): { state: string; questions: QuestionDraft[] } {
  try {
    const saved = sessionStorage.getItem(DRAFT);
    if (saved) return JSON.parse(saved) as { state: string; questions: QuestionDraft[] };
  } catch {
    /* a bad draft: start over */
  }
  return { state: EXAMPLE_STATE, questions: exampleQuestions() };
}

/** The playground: a state, questions of each type, run, answers with probability bars. */
export function PlaygroundPage() {
  const session = useSession();
  const draft = useState(loadDraft)[0];
  const [stateText, setStateText] = useState(draft.state);
  const [questions, setQuestions] = useState<QuestionDraft[]>(draft.questions);
  const [editorSeed, setEditorSeed] = useState(0);
  const [model, setModel] = useState("");
  const [key, setKey] = useState<string | null>(
    () => storedPlaygroundKey() ?? (session.who?.role === "account" ? session.credential : null),
  );
  const [running, setRunning] = useState(false);
  const [result, setResult] = useState<{ response: DecisionResponse; ms: number }>();
  const [error, setError] = useState<{ message: string; failure?: ApiError }>();
  const models = useLoad(fetchModels, []);
  const output = useRef<HTMLDivElement>(null);

  // In one column the answers are below the questions: bring them into view when they come.
  useEffect(() => {
    if ((result || error) && window.matchMedia("(max-width: 1099px)").matches)
      output.current?.scrollIntoView({ block: "start" });
  }, [result, error]);

  useEffect(() => {
    if (model === "" && models.data && models.data.length > 0) setModel(models.data[0]!.name);
  }, [models.data, model]);

  useEffect(() => {
    sessionStorage.setItem(DRAFT, JSON.stringify({ state: stateText, questions }));
  }, [stateText, questions]);

  const needsKey = session.who !== null;

  const run = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    const state = parseState(stateText);
    if ("error" in state) {
      setError({ message: state.error });
      return;
    }
    const body = questionsBody(questions);
    if ("problems" in body) {
      setError({ message: body.problems.map((p) => p.message).join("; ") });
      return;
    }
    if (needsKey && !key) {
      setError({ message: "choose the API key the playground calls with (above)" });
      return;
    }
    setRunning(true);
    const started = performance.now();
    try {
      const response = await decide(key, { model, state: state.state, ...body });
      setResult({ response, ms: Math.round(performance.now() - started) });
    } catch (e) {
      const failure = toApiError(e);
      setResult(undefined);
      setError({ message: failure.message, failure });
    } finally {
      setRunning(false);
    }
  };

  const reset = () => {
    setStateText(EXAMPLE_STATE);
    setQuestions(exampleQuestions());
    setEditorSeed((s) => s + 1);
    setResult(undefined);
    setError(undefined);
  };

  return (
    <section class="page playground">
      <div class="page-head">
        <h1>Playground</h1>
        <p class="muted">
          Write a state (any JSON) and questions, and read the answers' probabilities from{" "}
          <code>POST /v1/systemone</code>.
        </p>
      </div>

      {needsKey && (
        <PlaygroundKey
          value={key}
          onChange={(k) => {
            storePlaygroundKey(k);
            setKey(k);
          }}
        />
      )}

      <form class="playground-grid" onSubmit={run}>
        <div class="playground-input">
          <div class="card">
            <div class="card-head">
              <h2 id="state-label">State</h2>
              <button type="button" class="link-button" onClick={reset}>
                Reset example
              </button>
            </div>
            <JsonEditor
              key={editorSeed}
              initial={stateText}
              label="State (JSON)"
              onChange={setStateText}
            />
            <p class="hint">
              Evidence, never instructions. A string is used as it is; other values as compact JSON.
            </p>
          </div>

          <div class="card">
            <div class="card-head">
              <h2>Questions</h2>
              <span class="muted">
                {questions.length} of {MAX_QUESTIONS}
              </span>
            </div>
            {questions.map((q, i) => (
              <QuestionEditor
                key={q.uid}
                index={i}
                question={q}
                onChange={(next) =>
                  setQuestions(questions.map((x) => (x.uid === q.uid ? next : x)))
                }
                {...(questions.length > 1
                  ? { onRemove: () => setQuestions(questions.filter((x) => x.uid !== q.uid)) }
                  : {})}
              />
            ))}
            {questions.length < MAX_QUESTIONS && (
              <div class="add-question" role="group" aria-label="Add a question">
                <span class="muted">Add</span>
                {(["choice", "noul", "score"] as const).map((type) => (
                  <button
                    key={type}
                    type="button"
                    class="secondary small"
                    onClick={() =>
                      setQuestions([...questions, newQuestion(type, questions.length + 1)])
                    }
                  >
                    + {type}
                  </button>
                ))}
              </div>
            )}
          </div>

          <div class="run-bar">
            <div class="field inline">
              <label for="model">Model</label>
              <select id="model" value={model} onChange={(e) => setModel(e.currentTarget.value)}>
                {(models.data ?? []).map((m) => (
                  <option key={m.name} value={m.name}>
                    {m.name}
                  </option>
                ))}
              </select>
            </div>
            <button type="submit" class="primary" disabled={running || model === ""}>
              {running ? "Running…" : "Run"}
            </button>
          </div>
        </div>

        <div class="playground-output" aria-live="polite" ref={output}>
          {error && (
            <div class="card error-card" role="alert" data-testid="run-error">
              <h2>
                {error.failure && error.failure.status > 0
                  ? `${error.failure.status} ${error.failure.errorType}`
                  : "Not sent"}
              </h2>
              {error.failure && error.failure.details.length > 0 ? (
                <ul>
                  {error.failure.details.map((d, i) => (
                    <li key={i}>
                      <code>{d.loc.join(".")}</code>: {d.msg}
                    </li>
                  ))}
                </ul>
              ) : (
                <p>{error.message}</p>
              )}
              {error.failure?.requestId && <p class="hint">request id {error.failure.requestId}</p>}
            </div>
          )}
          {!result && !error && (
            <div class="card empty">
              <p class="muted">Run the questions to see their answers here.</p>
            </div>
          )}
          {result && (
            <>
              <div class="run-summary" data-testid="run-summary">
                <span>
                  <strong>{result.response.model}</strong>
                </span>
                <span>
                  {formatNumber(result.response.usage.input_tokens)} in ·{" "}
                  {formatNumber(result.response.usage.output_tokens)} out tokens
                </span>
                <span>{formatNumber(result.ms)} ms</span>
              </div>
              {Object.entries(result.response.answers).map(([id, answer]) => (
                <AnswerCard key={id} id={id} answer={answer} />
              ))}
              <details class="card raw">
                <summary>Response JSON</summary>
                <pre>{JSON.stringify(result.response, null, 2)}</pre>
              </details>
            </>
          )}
        </div>
      </form>
    </section>
  );
}

/**
 * The key the playground calls with. A key principal uses its own key by default; the admin holds
 * no key, so it pastes one or creates one for an account (listed on the API keys page like any
 * other, and revocable there).
 */
function PlaygroundKey(props: { value: string | null; onChange(key: string | null): void }) {
  const { who, credential, api, signOut } = useSession();
  const admin = who?.role === "admin";
  const [pasted, setPasted] = useState("");
  const accounts = useLoad(() => (admin ? api.accounts() : Promise.resolve(undefined)), [api]);
  const [account, setAccount] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();

  useEffect(() => {
    if (account === "" && accounts.data && accounts.data.length > 0)
      setAccount(accounts.data[0]!.name);
  }, [accounts.data, account]);

  if (props.value) {
    const own = props.value === credential;
    return (
      <div class="card key-bar" data-testid="playground-key">
        <span>
          Calls with <code>{props.value.slice(0, 12)}…</code>{" "}
          <span class="muted">{own ? "(your signed-in key)" : "(chosen in this tab)"}</span>
        </span>
        <button
          type="button"
          class="link-button"
          onClick={() => {
            setPasted("");
            props.onChange(null);
          }}
        >
          Use another key
        </button>
      </div>
    );
  }

  const create = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const created = await api.createKey({
        ...(admin ? { account } : {}),
        label: "console playground",
      });
      props.onChange(created.key);
    } catch (e) {
      const failure = toApiError(e);
      if (failure.status === 401) signOut(failure.message);
      setError(failure.message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="card key-picker">
      <h2>Which key?</h2>
      <p class="muted">
        The playground calls <code>/v1/systemone</code> with an API key, and its usage counts
        against that key's account.
      </p>
      <div class="form-row">
        <div class="field grow">
          <label for="playground-key">Paste a key</label>
          <input
            id="playground-key"
            type="password"
            autocomplete="off"
            placeholder="dsk_…"
            value={pasted}
            onInput={(e) => setPasted(e.currentTarget.value)}
          />
        </div>
        <button
          type="button"
          class="secondary"
          disabled={!/^dsk_\S+$/.test(pasted.trim())}
          onClick={() => props.onChange(pasted.trim())}
        >
          Use key
        </button>
      </div>
      <div class="form-row">
        {admin && (
          <AccountPicker
            id="playground-account"
            accounts={accounts.data}
            value={account}
            onChange={setAccount}
          />
        )}
        {!admin && credential && (
          <button type="button" class="secondary" onClick={() => props.onChange(credential)}>
            Use my signed-in key
          </button>
        )}
        <button
          type="button"
          class="secondary"
          disabled={busy || (admin && account === "")}
          onClick={create}
        >
          {busy ? "Creating…" : "Create a playground key"}
        </button>
      </div>
      {admin && accounts.data?.length === 0 && (
        <p class="hint">No accounts yet: create a key on the API keys page first.</p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

import type { Answer } from "../api";
import { formatPercent } from "../format";

/** One bar per outcome, longest first; `chosen` is highlighted. */
function ProbabilityBars(props: {
  rows: { key: string; label: string; p: number }[];
  chosen?: string;
}) {
  return (
    <ul class="bars">
      {props.rows.map((r) => (
        <li key={r.key} class={r.key === props.chosen ? "bar chosen" : "bar"}>
          <span class="bar-label" title={r.label}>
            {r.label}
          </span>
          <span
            class="bar-track"
            role="meter"
            aria-label={`P(${r.label})`}
            aria-valuemin={0}
            aria-valuemax={1}
            aria-valuenow={r.p}
          >
            <span class="bar-fill" style={{ width: `${r.p * 100}%` }} />
          </span>
          <span class="bar-value">{formatPercent(r.p)}</span>
        </li>
      ))}
    </ul>
  );
}

function Confidence({ value }: { value: number }) {
  return (
    <span
      class="confidence"
      title="(top probability − chance) / (1 − chance) for choice; spread for score"
    >
      confidence <strong>{value.toFixed(2)}</strong>
    </span>
  );
}

/** The answer to one question: its value, confidence and probability bars. */
export function AnswerCard({ id, answer }: { id: string; answer: Answer }) {
  return (
    <article class="card answer" data-testid="answer" data-question={id}>
      <header class="answer-head">
        <h3>{id}</h3>
        <span class="badge small">{answer.type}</span>
      </header>
      {answer.type === "noul" && (
        <>
          <p class="answer-value">
            P(yes) = <strong>{formatPercent(answer.noul)}</strong>
          </p>
          <ProbabilityBars
            chosen={answer.noul >= 0.5 ? "true" : "false"}
            rows={[
              { key: "true", label: "yes", p: answer.noul },
              { key: "false", label: "no", p: 1 - answer.noul },
            ]}
          />
        </>
      )}
      {answer.type === "choice" && (
        <>
          <p class="answer-value">
            <strong>{answer.choice}</strong> <Confidence value={answer.confidence} />
          </p>
          <ProbabilityBars
            chosen={answer.choice}
            rows={Object.entries(answer.probabilities)
              .map(([key, p]) => ({ key, label: key, p }))
              .sort((a, b) => b.p - a.p)}
          />
        </>
      )}
      {answer.type === "score" && (
        <>
          <p class="answer-value">
            score <strong>{answer.score.toFixed(2)}</strong>
            <span class="muted"> of 0–{Object.keys(answer.legend).length - 1}</span>{" "}
            <Confidence value={answer.confidence} />
          </p>
          <ProbabilityBars
            chosen={Object.entries(answer.probabilities).reduce((a, b) => (b[1] > a[1] ? b : a))[0]}
            rows={Object.entries(answer.probabilities).map(([key, p]) => ({
              key,
              label: `${key} · ${answer.legend[key] ?? ""}`,
              p,
            }))}
          />
        </>
      )}
    </article>
  );
}

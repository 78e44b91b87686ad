import {
  MAX_LEVELS,
  uid,
  type OptionDraft,
  type QuestionDraft,
  type QuestionType,
} from "../playground-model";

const TYPES: { type: QuestionType; label: string }[] = [
  { type: "choice", label: "choice: pick one" },
  { type: "noul", label: "noul: yes or no" },
  { type: "score", label: "score: a scale" },
];

/** One question: id, type, instructions and the criteria of its type. */
export function QuestionEditor(props: {
  index: number;
  question: QuestionDraft;
  onChange(q: QuestionDraft): void;
  onRemove?: () => void;
}) {
  const q = props.question;
  const base = `q${q.uid}`;
  const set = (patch: Partial<QuestionDraft>) => props.onChange({ ...q, ...patch });
  const setOption = (i: number, patch: Partial<OptionDraft>) =>
    set({ options: q.options.map((o, j) => (j === i ? { ...o, ...patch } : o)) });

  return (
    <fieldset class="question" data-testid="question">
      <legend class="visually-hidden">Question {props.index + 1}</legend>
      <div class="form-row">
        <div class="field">
          <label for={`${base}-id`}>Question id</label>
          <input
            id={`${base}-id`}
            value={q.id}
            required
            autocomplete="off"
            spellcheck={false}
            onInput={(e) => set({ id: e.currentTarget.value })}
          />
        </div>
        <div class="field grow">
          <label for={`${base}-type`}>Type</label>
          <select
            id={`${base}-type`}
            value={q.type}
            onChange={(e) => set({ type: e.currentTarget.value as QuestionType })}
          >
            {TYPES.map((t) => (
              <option key={t.type} value={t.type}>
                {t.label}
              </option>
            ))}
          </select>
        </div>
        {props.onRemove && (
          <button
            type="button"
            class="secondary small remove"
            onClick={props.onRemove}
            aria-label={`Remove question ${q.id || props.index + 1}`}
          >
            Remove
          </button>
        )}
      </div>
      <div class="field">
        <label for={`${base}-instructions`}>Instructions</label>
        <textarea
          id={`${base}-instructions`}
          rows={2}
          value={q.instructions}
          placeholder={
            q.type === "noul" ? "e.g. Is the customer asking for money back?" : "What to decide"
          }
          onInput={(e) => set({ instructions: e.currentTarget.value })}
        />
      </div>

      {q.type === "choice" && (
        <div class="criteria">
          <div class="criteria-head">Options (id and description; 2–255)</div>
          {q.options.map((o, i) => (
            <div class="criteria-row" key={o.uid}>
              <input
                aria-label={`Option ${i + 1} id`}
                class="option-id"
                value={o.id}
                placeholder="id"
                spellcheck={false}
                onInput={(e) => setOption(i, { id: e.currentTarget.value })}
              />
              <input
                aria-label={`Option ${i + 1} description`}
                class="grow"
                value={o.description}
                placeholder="description (optional)"
                onInput={(e) => setOption(i, { description: e.currentTarget.value })}
              />
              <button
                type="button"
                class="icon"
                disabled={q.options.length <= 2}
                onClick={() => set({ options: q.options.filter((_, j) => j !== i) })}
                aria-label={`Remove option ${o.id || i + 1}`}
              >
                ×
              </button>
            </div>
          ))}
          <button
            type="button"
            class="link-button"
            onClick={() =>
              set({
                options: [
                  ...q.options,
                  { uid: uid(), id: `option${q.options.length + 1}`, description: "" },
                ],
              })
            }
          >
            + Add option
          </button>
        </div>
      )}

      {q.type === "score" && (
        <div class="criteria">
          <div class="criteria-head">Levels (lowest first; 2–{MAX_LEVELS})</div>
          {q.levels.map((l, i) => (
            <div class="criteria-row" key={l.uid}>
              <span class="level-index" aria-hidden="true">
                {i}
              </span>
              <input
                aria-label={`Level ${i}`}
                class="grow"
                value={l.text}
                onInput={(e) =>
                  set({
                    levels: q.levels.map((x, j) =>
                      j === i ? { ...x, text: e.currentTarget.value } : x,
                    ),
                  })
                }
              />
              <button
                type="button"
                class="icon"
                disabled={q.levels.length <= 2}
                onClick={() => set({ levels: q.levels.filter((_, j) => j !== i) })}
                aria-label={`Remove level ${i}`}
              >
                ×
              </button>
            </div>
          ))}
          {q.levels.length < MAX_LEVELS && (
            <button
              type="button"
              class="link-button"
              onClick={() =>
                set({ levels: [...q.levels, { uid: uid(), text: `level ${q.levels.length}` }] })
              }
            >
              + Add level
            </button>
          )}
        </div>
      )}

      {q.type === "noul" && (
        <div class="criteria">
          <div class="criteria-head">What yes and no mean (optional)</div>
          <div class="criteria-row">
            <span class="level-index">yes</span>
            <input
              aria-label="What true means"
              class="grow"
              value={q.trueText}
              onInput={(e) => set({ trueText: e.currentTarget.value })}
            />
          </div>
          <div class="criteria-row">
            <span class="level-index">no</span>
            <input
              aria-label="What false means"
              class="grow"
              value={q.falseText}
              onInput={(e) => set({ falseText: e.currentTarget.value })}
            />
          </div>
        </div>
      )}
    </fieldset>
  );
}

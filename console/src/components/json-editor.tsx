import { json, jsonParseLinter } from "@codemirror/lang-json";
import { linter, lintGutter } from "@codemirror/lint";
import { EditorView, basicSetup } from "codemirror";
import { useEffect, useRef } from "preact/hooks";

/**
 * A JSON editor (CodeMirror 6 with its JSON language and parse linter): syntax colours, bracket
 * matching, and parse errors marked where they are. Uncontrolled: `initial` seeds it, `onChange`
 * reports every edit.
 */
export function JsonEditor(props: {
  initial: string;
  label: string;
  onChange(text: string): void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const onChange = useRef(props.onChange);
  onChange.current = props.onChange;

  useEffect(() => {
    const view = new EditorView({
      doc: props.initial,
      parent: host.current!,
      extensions: [
        basicSetup,
        json(),
        linter(jsonParseLinter(), { delay: 300 }),
        lintGutter(),
        EditorView.lineWrapping,
        EditorView.contentAttributes.of({ "aria-label": props.label }),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) onChange.current(update.state.doc.toString());
        }),
      ],
    });
    return () => view.destroy();
    // Seeded once: the editor owns its text from then on.
  }, []);

  return <div class="json-editor" ref={host} data-testid="state-editor" />;
}

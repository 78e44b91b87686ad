import { useEffect, useState } from "preact/hooks";

/**
 * Copies `text` to the clipboard. Where the Clipboard API is unavailable (plain http on another
 * host is not a secure context), selects the text of `fallbackInput` so Ctrl+C copies it.
 */
export function CopyButton(props: { text: string; fallbackInput?: () => HTMLInputElement | null }) {
  const [state, setState] = useState<"idle" | "copied" | "select">("idle");
  useEffect(() => {
    if (state === "idle") return;
    const timer = setTimeout(() => setState("idle"), 2500);
    return () => clearTimeout(timer);
  }, [state]);

  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.text);
      setState("copied");
    } catch {
      const input = props.fallbackInput?.();
      input?.focus();
      input?.select();
      setState("select");
    }
  };

  return (
    <button type="button" class="secondary" onClick={copy} aria-live="polite">
      {state === "copied" ? "Copied" : state === "select" ? "Press Ctrl+C" : "Copy"}
    </button>
  );
}

import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";

/**
 * A modal confirmation (the native `<dialog>`: focus is trapped, Escape cancels). Shown while
 * `open`; `onConfirm` / `onCancel` say what the person chose.
 */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  confirmLabel: string;
  busy?: boolean;
  children: ComponentChildren;
  onConfirm(): void;
  onCancel(): void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);

  return (
    <dialog
      ref={dialog}
      class="dialog"
      aria-labelledby="confirm-title"
      onCancel={(e) => {
        e.preventDefault();
        props.onCancel();
      }}
    >
      <h2 id="confirm-title">{props.title}</h2>
      {props.children}
      <div class="dialog-actions">
        <button type="button" class="secondary" onClick={props.onCancel} disabled={props.busy}>
          Cancel
        </button>
        <button type="button" class="danger" onClick={props.onConfirm} disabled={props.busy}>
          {props.busy ? "Working…" : props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

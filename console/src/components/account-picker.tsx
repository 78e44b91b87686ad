import type { AccountView } from "../api";

/**
 * The admin's choice of account (a key principal has one account and sees no picker).
 * `allLabel` adds an option for every account (value "").
 */
export function AccountPicker(props: {
  id: string;
  accounts: AccountView[] | undefined;
  value: string;
  allLabel?: string;
  onChange(name: string): void;
}) {
  return (
    <div class="field inline">
      <label for={props.id}>Account</label>
      <select
        id={props.id}
        value={props.value}
        onChange={(e) => props.onChange(e.currentTarget.value)}
        disabled={props.accounts === undefined}
      >
        {props.allLabel !== undefined && <option value="">{props.allLabel}</option>}
        {(props.accounts ?? []).map((a) => (
          <option key={a.name} value={a.name}>
            {a.name}
          </option>
        ))}
      </select>
    </div>
  );
}

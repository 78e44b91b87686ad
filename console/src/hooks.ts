import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "./api";
import { useSession } from "./session";

/** The state of a load: its data, its error, and a way to load again. */
export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload(): void;
}

/**
 * Loads `load()` when `deps` change. A 401 means the credential stopped working (revoked key):
 * the session ends and the sign-in page says why. Answers of superseded loads are dropped.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const session = useSession();
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ApiError>();
  const [loading, setLoading] = useState(true);
  const [generation, setGeneration] = useState(0);
  const current = useRef(0);
  useEffect(() => {
    const id = ++current.current;
    setLoading(true);
    load().then(
      (value) => {
        if (id !== current.current) return;
        setData(value);
        setError(undefined);
        setLoading(false);
      },
      (e: unknown) => {
        if (id !== current.current) return;
        const failure = toApiError(e);
        if (failure.status === 401) session.signOut(failure.message);
        setError(failure);
        setLoading(false);
      },
    );
  }, [...deps, generation]);
  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  return { data, error, loading, reload };
}

/** Any thrown value as an {@link ApiError}. */
export function toApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(0, "error", String(e));
}

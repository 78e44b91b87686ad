import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { noticeWhileSlow } from "../src/service/slow-notice.js";

describe("noticeWhileSlow", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("says it is still at it each interval until the work settles, then says nothing", async () => {
    const lines: string[] = [];
    let finish!: (value: string) => void;
    const work = new Promise<string>((resolve) => (finish = resolve));
    const waited = noticeWhileSlow(
      work,
      (l) => lines.push(l),
      (s) => `still loading (${s} s)`,
    );
    await vi.advanceTimersByTimeAsync(14_999);
    expect(lines).toEqual([]);
    await vi.advanceTimersByTimeAsync(30_001);
    expect(lines).toEqual(["still loading (15 s)", "still loading (30 s)", "still loading (45 s)"]);
    finish("engine");
    expect(await waited).toBe("engine");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(lines).toHaveLength(3);
  });

  it("passes a failure through and stops", async () => {
    const lines: string[] = [];
    const failed = noticeWhileSlow(
      Promise.reject(new Error("not a GGUF")),
      (l) => lines.push(l),
      () => "still",
    );
    await expect(failed).rejects.toThrow("not a GGUF");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(lines).toEqual([]);
  });
});

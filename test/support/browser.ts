import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";

/**
 * Headless Chromium for the console's end-to-end tests: Debian's `chromium` package driven by
 * playwright-core (which downloads no browser of its own). `.ci/run` installs the package when it
 * is missing; `DECISIOND_CHROMIUM` names another binary.
 */

/** The Chromium binary. */
export const CHROMIUM_PATH = process.env.DECISIOND_CHROMIUM ?? "/usr/bin/chromium";

/** Why the browser tests cannot run here, or `undefined` when they can. */
export function chromiumMissing(): string | undefined {
  return existsSync(CHROMIUM_PATH)
    ? undefined
    : `no Chromium at ${CHROMIUM_PATH}: apt-get install -y chromium (as .ci/run does), or set DECISIOND_CHROMIUM`;
}

/**
 * Launches Chromium headless. The flags keep it from reaching for the network (this machine has
 * none but the loopback) and from needing a sandbox or a GPU; playwright-core gives every launch
 * a fresh, empty profile directory of its own.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** Where the tests leave their screenshots (gitignored). */
export const ARTIFACTS_DIR = join(import.meta.dirname, "..", "..", "test-artifacts", "console");

/**
 * Saves a picture of the whole page as `test-artifacts/console/<name>.png`; returns its path. The
 * viewport is made as tall as the page for it (then restored), so what sticks to the top or the
 * bottom of the screen is drawn where a screen that tall would show it.
 */
export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  const path = join(ARTIFACTS_DIR, `${name}.png`);
  const viewport = page.viewportSize()!;
  await page.evaluate("window.scrollTo(0, 0)");
  const height = await page.evaluate<number>("document.documentElement.scrollHeight");
  await page.setViewportSize({ width: viewport.width, height: Math.max(height, viewport.height) });
  try {
    await page.screenshot({ path, animations: "disabled" });
  } finally {
    await page.setViewportSize(viewport);
  }
  return path;
}

/** How far the page is wider than its viewport, in CSS pixels (0: no sideways scrolling). */
export function horizontalOverflow(page: Page): Promise<number> {
  // A string: these tests are type-checked without the DOM's types.
  return page.evaluate<number>(
    "document.documentElement.scrollWidth - document.documentElement.clientWidth",
  );
}

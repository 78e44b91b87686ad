import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

/**
 * The console's front end (Preact), built ahead of time into dist/console-app/, which decisiond
 * serves under /console/ (src/console/assets.ts). Everything is bundled: nothing loads from a CDN.
 *
 * `npx vite console` serves it with live reload at http://localhost:5173/console/, passing API
 * calls to a decisiond at DECISIOND_URL (default http://127.0.0.1:8080).
 */
const api = process.env.DECISIOND_URL ?? "http://127.0.0.1:8080";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/console/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  server: { proxy: { "/console/api": api, "/v1": api } },
  build: {
    outDir: fileURLToPath(new URL("../dist/console-app", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    // The bundle is served by decisiond itself; a few hundred kB (mostly the JSON editor) is fine.
    chunkSizeWarningLimit: 1024,
  },
});

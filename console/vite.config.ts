import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

/**
 * The console's front end (Preact), built ahead of time into dist/console-app/, which decisiond
 * serves under /console/ (src/console/assets.ts). Everything is bundled: nothing loads from a CDN.
 */
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/console/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: fileURLToPath(new URL("../dist/console-app", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    // The bundle is served by decisiond itself; a few hundred kB (mostly the JSON editor) is fine.
    chunkSizeWarningLimit: 1024,
  },
});

// Issue 8 measurement: the vision path on the generated random-weight fixture pair
// (test/fixtures/vision-gguf.ts), through the real HTTP server.
// - time to encode one image, and one 8-frame video (llama.cpp's own "image slice encoded in"
//   times, summed by the engine's counters), plus the media decoding (sharp / ffmpeg) wall time;
// - request latency with 1 and 16 questions, each run with a fresh image (nothing cached) and
//   again with the same image and state (prefix cached).
// Medians of RUNS runs. Random weights: this times the wiring, not a real model's encoder.
// Usage: npm run build && npx vite-node bench/vision.mts [runs]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { decodeRequestMedia } from "../src/media/request.js";
import { runTool } from "../src/media/tools.js";
import { startService } from "../src/service/build.js";
import { writeVisionFixture } from "../test/fixtures/vision-gguf.js";

const RUNS = Number(process.argv[2] ?? 5);
const dir = mkdtempSync(join(tmpdir(), "decisiond-bench-vision-"));
const fixture = writeVisionFixture(dir);
const service = await startService({
  ...fixture,
  modelPath: fixture.modelPath,
  modelId: "tiny-vlm",
  port: 0,
  logger: false,
  contextSize: 4096,
});
const url = `${service.url}/v1/systemone`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

let colour = 0;
async function freshImage(): Promise<string> {
  colour++;
  const png = await sharp({
    create: {
      width: 640,
      height: 480,
      channels: 3,
      background: { r: (colour * 37) % 256, g: (colour * 91) % 256, b: (colour * 53) % 256 },
    },
  })
    .png()
    .toBuffer();
  return `data:image/png;base64,${png.toString("base64")}`;
}

async function movie(seconds: number, seed: number): Promise<string> {
  const frames: Buffer[] = [];
  for (let i = 0; i < seconds * 10; i++)
    frames.push(Buffer.alloc(320 * 240 * 3, (i * 7 + seed * 41) % 256));
  const raw = join(dir, "frames.rgb");
  const out = join(dir, "movie.mp4");
  writeFileSync(raw, Buffer.concat(frames));
  await runTool("ffmpeg", [
    ...["-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "320x240", "-r", "10"],
    ...["-i", raw, "-c:v", "mpeg4", "-q:v", "4", "-f", "mp4", out],
  ]);
  return `data:video/mp4;base64,${readFileSync(out).toString("base64")}`;
}

const questions = (n: number) =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [
      `q${i}`,
      {
        type: "choice",
        instructions: `Which state is panel ${i} in?`,
        criteria: { on: null, off: null, error: null },
      },
    ]),
  );
const state = { device: "router", panel: "status page", note: "lights blinking since noon" };

async function post(body: object): Promise<{ ms: number; encodeMs: number; encoded: number }> {
  const before = { ...service.engine.counters };
  const t = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "tiny-vlm", state, ...body }),
  });
  if (res.status !== 200) throw new Error(`${res.status} ${await res.text()}`);
  await res.json();
  const after = service.engine.counters;
  return {
    ms: performance.now() - t,
    encodeMs: after.mediaEncodeMs! - before.mediaEncodeMs!,
    encoded: after.mediaEncoded! - before.mediaEncoded!,
  };
}

const results: Record<string, unknown> = {};
await post({ questions: questions(1), images: [await freshImage()] }); // warm-up

for (const n of [1, 16]) {
  const fresh: number[] = [];
  const cached: number[] = [];
  const encode: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const image = await freshImage();
    const first = await post({ questions: questions(n), images: [image] });
    if (first.encoded !== 1) throw new Error(`expected one encode, got ${first.encoded}`);
    fresh.push(first.ms);
    encode.push(first.encodeMs);
    cached.push((await post({ questions: questions(n), images: [image] })).ms);
  }
  results[`image_${n}_questions`] = {
    fresh_image_ms: median(fresh),
    same_image_again_ms: median(cached),
    llama_cpp_encode_ms: median(encode),
  };
}

const video = await movie(6, 0);
const sampling: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const t = performance.now();
  await decodeRequestMedia(
    { videos: [video] },
    { imageSize: service.engine.model.imageSize!, videoFrames: 8, videoMaxSeconds: 60 },
  );
  sampling.push(performance.now() - t);
}
const imageDecode: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const image = await freshImage();
  const t = performance.now();
  await decodeRequestMedia(
    { images: [image] },
    { imageSize: service.engine.model.imageSize!, videoFrames: 8, videoMaxSeconds: 60 },
  );
  imageDecode.push(performance.now() - t);
}
const videoRuns: { ms: number; encodeMs: number; encoded: number }[] = [];
for (let r = 0; r < RUNS; r++) {
  // A different video each run, so its frames are not found in the cache.
  videoRuns.push(await post({ questions: questions(1), videos: [await movie(6, r + 1)] }));
}
results.image_decode_640x480_png_ms = median(imageDecode);
results.video_8_frames = {
  ffmpeg_sampling_and_sharp_ms: median(sampling),
  request_1_question_ms: median(videoRuns.map((v) => v.ms)),
  llama_cpp_encode_ms_all_frames: median(videoRuns.map((v) => v.encodeMs)),
  encodes_per_request: median(videoRuns.map((v) => v.encoded)),
};
results.machine = { cpus: cpus().length, loadavg_1m: loadavg()[0], runs: RUNS };
console.log(JSON.stringify(results, null, 2));
await service.close();
rmSync(dir, { recursive: true, force: true });

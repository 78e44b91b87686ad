import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderMediaText } from "../src/decision/prompt.js";
import { parseDataUrl } from "../src/media/data-url.js";
import { MediaInputError } from "../src/media/errors.js";
import { ImageError, normalizeImage } from "../src/media/image.js";
import { decodeRequestMedia } from "../src/media/request.js";
import { runTool, toolsAvailable } from "../src/media/tools.js";
import { probeVideo, sampleVideo, VideoError } from "../src/media/video.js";

/** Media decoding on real bytes: sharp, ffprobe and ffmpeg, no model. */

const haveTools = await toolsAvailable();
if (!haveTools) console.warn("ffmpeg/ffprobe not found: video decoding tests skipped");

describe("data URLs", () => {
  it("decodes the type and the base64 payload", () => {
    const url = parseDataUrl("data:Image/PNG;base64," + Buffer.from("hello").toString("base64"));
    expect(url.mimeType).toBe("image/png");
    expect(url.bytes.toString()).toBe("hello");
    // Wrapped in lines, as `base64` without -w0 and MIME encoders write it.
    const text = "a longer payload, to be wrapped across several lines".repeat(3);
    const wrapped = Buffer.from(text).toString("base64").replace(/.{20}/g, "$&\r\n");
    expect(parseDataUrl(`data:image/png;base64,${wrapped}`).bytes.toString()).toBe(text);
    expect(parseDataUrl("data:image/png;base64, aGVs bG8=\t").bytes.toString()).toBe("hello");
  });

  it("says what is wrong with a bad one", () => {
    expect(() => parseDataUrl("data:image/png,abc")).toThrow(/not a base64 data URL/);
    expect(() => parseDataUrl("data:image/png;base64,")).toThrow(/holds no data/);
    expect(() => parseDataUrl("data:image/png;base64,ab$c")).toThrow(/not valid base64/);
    expect(() => parseDataUrl("data:image/png;base64, \n ")).toThrow(/holds no data/);
    expect(() => parseDataUrl("data:image/png;base64,aGVs\u00a0bG8=")).toThrow(/not valid base64/);
  });
});

describe("images", () => {
  const make = (w: number, h: number) =>
    sharp({ create: { width: w, height: h, channels: 4, background: "#ff000080" } });

  it("turns PNG, JPEG and WebP into a square PNG of the projector's size, aspect ratio kept", async () => {
    for (const [format, bytes] of [
      ["png", await make(90, 30).png().toBuffer()],
      ["jpeg", await make(90, 30).flatten({ background: "#ffffff" }).jpeg().toBuffer()],
      ["webp", await make(90, 30).webp().toBuffer()],
    ] as const) {
      const image = await normalizeImage(bytes, `image/${format}`, { size: 48 });
      expect(image.format).toBe(format);
      expect([image.width, image.height]).toEqual([90, 30]);
      const out = sharp(image.data);
      const meta = await out.metadata();
      expect([meta.format, meta.width, meta.height, meta.channels]).toEqual(["png", 48, 48, 3]);
      // Letterboxed: the top rows are padding, the middle row is the (flattened) picture.
      const { data } = await out.raw().toBuffer({ resolveWithObject: true });
      expect([...data.subarray(0, 3)]).toEqual([0, 0, 0]);
      const middle = (24 * 48 + 24) * 3;
      expect(data[middle]!).toBeGreaterThan(200);
    }
  });

  it("accepts image/jpg for JPEG", async () => {
    const jpeg = await make(8, 8).jpeg().toBuffer();
    expect((await normalizeImage(jpeg, "image/jpg", { size: 8 })).format).toBe("jpeg");
  });

  it("refuses other formats, mislabelled data, corrupt data and too many pixels", async () => {
    const png = await make(40, 40).png().toBuffer();
    const gif = await make(8, 8).gif().toBuffer();
    await expect(normalizeImage(gif, "image/gif", { size: 8 })).rejects.toThrow(
      /image\/gif is not accepted/,
    );
    await expect(normalizeImage(gif, "image/png", { size: 8 })).rejects.toThrow(
      /the data is a GIF image; send PNG, JPEG or WebP/,
    );
    await expect(normalizeImage(png, "image/webp", { size: 8 })).rejects.toThrow(
      "the data URL says image/webp but the data is a PNG image",
    );
    await expect(
      normalizeImage(Buffer.from("not an image at all"), "image/png", { size: 8 }),
    ).rejects.toThrow(/not a readable image/);
    const truncated = png.subarray(0, png.length - 30);
    await expect(normalizeImage(truncated, "image/png", { size: 8 })).rejects.toBeInstanceOf(
      ImageError,
    );
    await expect(normalizeImage(png, "image/png", { size: 8, maxPixels: 1000 })).rejects.toThrow(
      /limit is 1000 pixels/,
    );
  });

  it("reports a bad image at body.images[0]", async () => {
    const error = await decodeRequestMedia(
      { images: ["data:image/png;base64,AAAA"] },
      { imageSize: 8, videoFrames: 2, videoMaxSeconds: 10 },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MediaInputError);
    expect((error as MediaInputError).loc).toEqual(["body", "images", 0]);
  });
});

describe("the prompt text around media", () => {
  it("captions an image, and each video frame with its time", () => {
    const image = { data: new Uint8Array(), mimeType: "image/png" as const };
    expect(renderMediaText({ kind: "image", frames: [{ image }] })).toEqual({
      before: ["Image:\n"],
      after: "\n",
    });
    const video = renderMediaText({
      kind: "video",
      durationSeconds: 4,
      frames: [
        { image, seconds: 1 },
        { image, seconds: 3 },
      ],
    });
    expect(video.before).toEqual([
      "Video of 4.00 s, 2 frames:\nFrame 1 of 2 at 1.00 s:\n",
      "\nFrame 2 of 2 at 3.00 s:\n",
    ]);
  });
});

describe.skipIf(!haveTools)("videos", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "decisiond-media-"));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** `seconds` of 32×24 video at 5 fps whose red channel is the frame number × 10. */
  async function video(seconds: number, container: "mp4" | "matroska"): Promise<Buffer> {
    const frames = Array.from({ length: seconds * 5 }, (_, i) =>
      Buffer.alloc(32 * 24 * 3, Buffer.from([i * 10, 128, 128])),
    );
    const raw = join(dir, "frames.rgb");
    const out = join(dir, `out.${container === "mp4" ? "mp4" : "mkv"}`);
    await writeFile(raw, Buffer.concat(frames));
    await runTool("ffmpeg", [
      ...["-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "32x24"],
      ...["-r", "5", "-i", raw, "-c:v", "mpeg4", "-q:v", "2", "-f", container, out],
    ]);
    return readFile(out);
  }

  it("probes an MP4 and samples evenly spaced frames in time order", async () => {
    const bytes = await video(4, "mp4");
    const file = join(dir, "probe.mp4");
    await writeFile(file, bytes);
    const info = await probeVideo(file);
    expect(info.durationSeconds).toBeCloseTo(4, 1);
    expect([info.width, info.height, info.framesPerSecond]).toEqual([32, 24, 5]);
    const { frames } = await sampleVideo(bytes, { frames: 4, maxSeconds: 10 });
    expect(frames.map((f) => f.seconds)).toEqual([0.5, 1.5, 2.5, 3.5]);
    // The red channel grows with the frame number: frames come out in time order.
    const reds = await Promise.all(
      frames.map(async (f) => (await sharp(f.png).raw().toBuffer())[0]!),
    );
    expect([...reds].sort((a, b) => a - b)).toEqual(reds);
    expect(new Set(reds).size).toBe(4);
  });

  it("refuses a video over the duration bound, and a container that is not MP4", async () => {
    await expect(sampleVideo(await video(3, "mp4"), { frames: 2, maxSeconds: 2 })).rejects.toThrow(
      "the video is 3.0 s long; the limit is 2 s",
    );
    await expect(
      sampleVideo(await video(1, "matroska"), { frames: 2, maxSeconds: 5 }),
    ).rejects.toThrow(/not an MP4/);
    await expect(
      sampleVideo(Buffer.from("garbage"), { frames: 2, maxSeconds: 5 }),
    ).rejects.toBeInstanceOf(VideoError);
  });
});

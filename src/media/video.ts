import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { runTool } from "./tools.js";

/** Default number of frames sampled from a video. */
export const DEFAULT_VIDEO_FRAMES = 8;
/** Default longest video accepted, in seconds. */
export const DEFAULT_VIDEO_MAX_SECONDS = 60;

/** What ffprobe says about a video. */
export interface VideoInfo {
  readonly durationSeconds: number;
  readonly width: number;
  readonly height: number;
  /** The video stream's codec, e.g. `h264`. */
  readonly codec: string;
  /** Average frames per second, when the container says. */
  readonly framesPerSecond?: number;
}

/** One sampled frame. */
export interface VideoFrame {
  /** Presentation time of the frame, in seconds from the start. */
  readonly seconds: number;
  /** The frame as PNG bytes, at the video's own size. */
  readonly png: Buffer;
}

/** Thrown for a video that cannot be used; the message says why. */
export class VideoError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "VideoError";
  }
}

/** Options of {@link sampleVideo}. */
export interface SampleOptions {
  /** Frames to sample, evenly spaced. */
  readonly frames: number;
  /** Longest duration accepted, in seconds. */
  readonly maxSeconds: number;
  /** Largest frame (width × height) accepted. Default 40 megapixels. */
  readonly maxPixels?: number;
}

/**
 * Probes an MP4 with ffprobe and samples `frames` evenly spaced frames with ffmpeg: frame i is
 * taken at (i + ½)·duration/frames, the middle of the i-th of `frames` equal spans. The bytes go
 * to a temporary file (MP4's index may sit at the end, so a pipe is not enough), removed after.
 * @throws {@link VideoError} when the data is not an MP4 with a video stream, its duration cannot be
 *   read or exceeds `maxSeconds`, its frames are too large, or a frame cannot be decoded.
 */
export async function sampleVideo(
  bytes: Buffer,
  options: SampleOptions,
): Promise<{ info: VideoInfo; frames: VideoFrame[] }> {
  const dir = await mkdtemp(join(tmpdir(), "decisiond-video-"));
  try {
    const file = join(dir, "input.mp4");
    await writeFile(file, bytes);
    const info = await probeVideo(file);
    if (info.durationSeconds > options.maxSeconds)
      throw new VideoError(
        `the video is ${info.durationSeconds.toFixed(1)} s long; the limit is ${options.maxSeconds} s`,
      );
    const maxPixels = options.maxPixels ?? 40_000_000;
    if (info.width * info.height > maxPixels)
      throw new VideoError(
        `the video is ${info.width}×${info.height}; the limit is ${maxPixels} pixels per frame`,
      );
    // The last frame starts one frame interval before the end; a later time has no frame.
    const interval = info.framesPerSecond ? 1 / info.framesPerSecond : 0;
    const last = Math.max(0, info.durationSeconds - interval);
    const frames: VideoFrame[] = [];
    for (let i = 0; i < options.frames; i++) {
      const seconds = Math.min(last, ((i + 0.5) * info.durationSeconds) / options.frames);
      frames.push({ seconds, png: await frameAt(file, seconds, interval) });
    }
    return { info, frames };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** ffprobe's view of a file. @throws {@link VideoError} for anything but an MP4 with a video stream. */
export async function probeVideo(file: string): Promise<VideoInfo> {
  let json: {
    format?: { format_name?: string; duration?: string };
    streams?: {
      codec_type?: string;
      codec_name?: string;
      avg_frame_rate?: string;
      width?: number;
      height?: number;
      duration?: string;
    }[];
  };
  try {
    const { stdout } = await runTool("ffprobe", [
      "-v",
      "error",
      "-print_format",
      "json",
      "-show_format",
      "-show_streams",
      file,
    ]);
    json = JSON.parse(stdout.toString("utf8")) as typeof json;
  } catch (error) {
    if (error instanceof Error && /not installed/.test(error.message)) throw error;
    throw new VideoError(
      `the data is not a readable video (${withoutPath((error as Error).message, file)})`,
    );
  }
  const formats = (json.format?.format_name ?? "").split(",");
  if (!formats.includes("mp4"))
    throw new VideoError(
      `the data is not an MP4 (ffprobe reads it as ${json.format?.format_name ?? "unknown"})`,
    );
  const stream = json.streams?.find((s) => s.codec_type === "video");
  if (!stream) throw new VideoError("the MP4 has no video stream");
  const duration = Number(json.format?.duration ?? stream.duration);
  if (!Number.isFinite(duration) || duration <= 0)
    throw new VideoError("the MP4's duration cannot be read");
  const [num, den] = (stream.avg_frame_rate ?? "").split("/").map(Number);
  const fps = num && den ? num / den : undefined;
  return {
    durationSeconds: duration,
    width: stream.width ?? 0,
    height: stream.height ?? 0,
    codec: stream.codec_name ?? "unknown",
    ...(fps && Number.isFinite(fps) && fps > 0 ? { framesPerSecond: fps } : {}),
  };
}

/**
 * The frame shown at `seconds`, as PNG; when none starts at or after it (the end of a stream),
 * the one a frame interval earlier.
 * @throws {@link VideoError} when no frame can be decoded there.
 */
async function frameAt(file: string, seconds: number, interval: number): Promise<Buffer> {
  const first = await decodeFrame(file, seconds);
  if (first.length > 0) return first;
  const earlier = await decodeFrame(file, Math.max(0, seconds - Math.max(interval, 0.1)));
  if (earlier.length > 0) return earlier;
  throw new VideoError(`no frame at ${seconds.toFixed(2)} s`);
}

async function decodeFrame(file: string, seconds: number): Promise<Buffer> {
  try {
    const { stdout } = await runTool("ffmpeg", [
      "-v",
      "error",
      "-ss",
      seconds.toFixed(3),
      "-i",
      file,
      "-frames:v",
      "1",
      "-f",
      "image2pipe",
      "-vcodec",
      "png",
      "-",
    ]);
    return stdout;
  } catch (error) {
    throw new VideoError(
      `cannot decode the frame at ${seconds.toFixed(2)} s (${withoutPath((error as Error).message, file)})`,
    );
  }
}

/**
 * A tool's message with the temporary file's path (and its directory) replaced by "the video":
 * a reply must not tell the caller where the server keeps its files.
 */
export function withoutPath(message: string, file: string): string {
  const dir = dirname(file);
  return message.replaceAll(file, "the video").replaceAll(dir, "the video's folder");
}

import type { DecisionMedia } from "../decision/types.js";
import { parseDataUrl } from "./data-url.js";
import { MediaInputError } from "./errors.js";
import { ImageError, normalizeImage } from "./image.js";
import { sampleVideo, VideoError } from "./video.js";

/** How a served model takes media; see {@link decodeRequestMedia}. */
export interface MediaOptions {
  /** Side of the square images the model's projector reads. */
  readonly imageSize: number;
  /** Largest decoded image or frame, in pixels. Default 40 megapixels. */
  readonly maxPixels?: number;
  /** Frames sampled from a video (already capped by the model's context). */
  readonly videoFrames: number;
  /** Longest video accepted, in seconds. */
  readonly videoMaxSeconds: number;
}

/**
 * Decodes a request's `images` (one PNG, JPEG or WebP) or `videos` (one MP4) into the frames the
 * decision layer places in the prefix, each a `imageSize`-square PNG.
 * @returns `undefined` when the request has neither.
 * @throws {@link MediaInputError} at `["body", "images" | "videos", 0]` when the data cannot be used.
 * @example
 * ```ts
 * const media = await decodeRequestMedia({ images: [dataUrl] }, options); // → 1 frame, a PNG
 * ```
 */
export async function decodeRequestMedia(
  input: { readonly images?: readonly string[]; readonly videos?: readonly string[] },
  options: MediaOptions,
): Promise<DecisionMedia | undefined> {
  const maxPixels = options.maxPixels;
  const normalize = async (bytes: Buffer, mime: string, loc: (string | number)[]) => {
    try {
      const image = await normalizeImage(bytes, mime, {
        size: options.imageSize,
        ...(maxPixels ? { maxPixels } : {}),
      });
      return { data: image.data, mimeType: "image/png" as const };
    } catch (error) {
      if (error instanceof ImageError) throw new MediaInputError(loc, error.message);
      throw error;
    }
  };
  const image = input.images?.[0];
  if (image !== undefined) {
    const loc = ["body", "images", 0];
    const url = parse(image, loc);
    if (!url.mimeType.startsWith("image/"))
      throw new MediaInputError(loc, `${url.mimeType} is not an image type`);
    return { kind: "image", frames: [{ image: await normalize(url.bytes, url.mimeType, loc) }] };
  }
  const video = input.videos?.[0];
  if (video !== undefined) {
    const loc = ["body", "videos", 0];
    const url = parse(video, loc);
    if (url.mimeType !== "video/mp4")
      throw new MediaInputError(loc, `${url.mimeType} is not accepted; send video/mp4`);
    let sampled: Awaited<ReturnType<typeof sampleVideo>>;
    try {
      sampled = await sampleVideo(url.bytes, {
        frames: options.videoFrames,
        maxSeconds: options.videoMaxSeconds,
        ...(maxPixels ? { maxPixels } : {}),
      });
    } catch (error) {
      if (error instanceof VideoError) throw new MediaInputError(loc, error.message);
      throw error;
    }
    const frames = [];
    for (const frame of sampled.frames)
      frames.push({
        image: await normalize(frame.png, "image/png", loc),
        seconds: frame.seconds,
      });
    return { kind: "video", frames, durationSeconds: sampled.info.durationSeconds };
  }
  return undefined;
}

function parse(url: string, loc: (string | number)[]) {
  try {
    return parseDataUrl(url);
  } catch (error) {
    throw new MediaInputError(loc, (error as Error).message);
  }
}

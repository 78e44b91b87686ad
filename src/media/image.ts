import sharp from "sharp";

/** The image formats a request may carry. */
export const IMAGE_FORMATS = ["png", "jpeg", "webp"] as const;
export type ImageFormat = (typeof IMAGE_FORMATS)[number];

/** Default bound on decoded input pixels (width × height): 40 megapixels. */
export const DEFAULT_MAX_IMAGE_PIXELS = 40_000_000;

/** Options of {@link normalizeImage}. */
export interface NormalizeOptions {
  /** Side in pixels of the square output (the projector's input size). */
  readonly size: number;
  /** Largest width × height accepted. Default {@link DEFAULT_MAX_IMAGE_PIXELS}. */
  readonly maxPixels?: number;
}

/** An image ready for the engine. */
export interface NormalizedImage {
  /** PNG bytes, `size` × `size`, RGB. */
  readonly data: Buffer;
  /** The input's format, width and height (after EXIF rotation). */
  readonly format: ImageFormat;
  readonly width: number;
  readonly height: number;
}

/** Thrown by {@link normalizeImage} for bytes that are not a usable image; the message says why. */
export class ImageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ImageError";
  }
}

/**
 * Decodes an image with sharp (libvips) and turns it into the square PNG the projector reads:
 * EXIF orientation applied, transparency flattened onto white, scaled to fit `size` × `size`
 * with its aspect ratio kept and the rest padded black (so every image takes the same number of
 * image tokens). The bytes are checked, not only the declared type: the whole image is decoded,
 * so a truncated or corrupt file fails here, and its real format must match `declared`.
 * @param declared - the data URL's media type, e.g. `image/png`.
 * @throws {@link ImageError} for an unsupported or mislabelled format, corrupt data, or too many pixels.
 */
export async function normalizeImage(
  bytes: Buffer,
  declared: string,
  options: NormalizeOptions,
): Promise<NormalizedImage> {
  const declaredFormat = declaredImageFormat(declared);
  const maxPixels = options.maxPixels ?? DEFAULT_MAX_IMAGE_PIXELS;
  const input = { failOn: "error", limitInputPixels: maxPixels } as const;
  let metadata: sharp.Metadata;
  try {
    // The header only: the pixel bound is checked below, with a message that says so.
    metadata = await sharp(bytes, { failOn: "error", limitInputPixels: false }).metadata();
  } catch (error) {
    throw new ImageError(`the data is not a readable image (${reason(error)})`);
  }
  const format = metadata.format as string | undefined;
  if (!format || !(IMAGE_FORMATS as readonly string[]).includes(format))
    throw new ImageError(
      `the data is ${format ? `a ${format.toUpperCase()} image` : "not an image"}; send PNG, JPEG or WebP`,
    );
  if (format !== declaredFormat)
    throw new ImageError(
      `the data URL says ${declared} but the data is a ${format.toUpperCase()} image`,
    );
  const width = metadata.autoOrient?.width ?? metadata.width ?? 0;
  const height = metadata.autoOrient?.height ?? metadata.height ?? 0;
  if (width * height > maxPixels)
    throw new ImageError(`the image is ${width}×${height}; the limit is ${maxPixels} pixels`);
  try {
    // Two passes, because sharp runs its operations in a fixed order (resize before flatten):
    // first the picture, scaled to fit and flattened; then the padding around it.
    const fitted = await sharp(bytes, input)
      .rotate()
      .resize(options.size, options.size, { fit: "inside" })
      .flatten({ background: { r: 255, g: 255, b: 255 } })
      .png()
      .toBuffer();
    const data = await sharp(fitted)
      .resize(options.size, options.size, { fit: "contain", background: { r: 0, g: 0, b: 0 } })
      .removeAlpha()
      .png()
      .toBuffer();
    return { data, format, width, height };
  } catch (error) {
    throw new ImageError(`the ${format.toUpperCase()} data is corrupt (${reason(error)})`);
  }
}

/** `image/png` → `png`; `image/jpg` is taken as `jpeg`. @throws {@link ImageError} for other types. */
function declaredImageFormat(declared: string): ImageFormat {
  const subtype = declared.toLowerCase().replace(/^image\//, "");
  if (subtype === "png" || subtype === "webp") return subtype;
  if (subtype === "jpeg" || subtype === "jpg") return "jpeg";
  throw new ImageError(`${declared} is not accepted; send image/png, image/jpeg or image/webp`);
}

function reason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0]!.trim();
}

/** The part of madge's API the tests use (madge ships no types). */
declare module "madge" {
  interface MadgeResult {
    /** Each module (relative to `baseDir`) and the modules it imports. */
    obj(): Record<string, string[]>;
  }
  interface MadgeOptions {
    baseDir?: string;
    fileExtensions?: string[];
    tsConfig?: string;
    includeNpm?: boolean;
    detectiveOptions?: Record<string, Record<string, unknown>>;
  }
  export default function madge(
    path: string | string[],
    options?: MadgeOptions,
  ): Promise<MadgeResult>;
}

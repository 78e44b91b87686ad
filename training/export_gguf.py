"""Writes a PEFT LoRA adapter (from train.py) as a GGUF LoRA adapter that llama.cpp loads.

Uses llama.cpp's own `convert_lora_to_gguf.py`, which is reachable here only inside the
`llama-cpp-python` sdist on PyPI: the sdist is downloaded once with pip and the converter (with the
`convert_hf_to_gguf.py` and `gguf-py` it imports) is kept under `$DECISIOND_HOME/llama-cpp-src`
(default `~/.cache/decisiond/llama-cpp-src`). The converter reads the base's Hugging Face config,
which train.py saves beside the adapter (`base-config/`).

Usage: python training/export_gguf.py --adapter DIR --out FILE.gguf [--outtype f16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# The llama.cpp inside this sdist version is the one whose converter is used (pinned).
LLAMA_CPP_PYTHON = "0.3.36"
NEEDED = ("convert_lora_to_gguf.py", "convert_hf_to_gguf.py", "gguf-py/", "conversion/")


def home() -> Path:
    return Path(os.environ.get("DECISIOND_HOME", Path.home() / ".cache" / "decisiond"))


def converter_dir() -> Path:
    """The folder holding llama.cpp's converter, downloading the sdist on first use."""
    dest = home() / "llama-cpp-src" / LLAMA_CPP_PYTHON
    if (dest / "convert_lora_to_gguf.py").exists():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
             f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", tmp],
            check=True,
        )
        sdist = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        root = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(root)
                       and any(m.name[len(root):].startswith(n) for n in NEEDED)]
            for m in members:
                m.name = m.name[len(root):]
            dest.mkdir(parents=True, exist_ok=True)
            tar.extractall(dest, members=members, filter="data")
    return dest


def export(adapter: Path, out: Path, outtype: str = "f16") -> Path:
    """Converts `adapter` (a PEFT folder with `base-config/`) to the GGUF file `out`.
    @raises subprocess.CalledProcessError when the converter fails."""
    src = converter_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, str(src / "convert_lora_to_gguf.py"), "--base", str(adapter / "base-config"),
         "--outfile", str(out), "--outtype", outtype, str(adapter)],
        check=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", required=True, type=Path, help="PEFT adapter folder from train.py")
    ap.add_argument("--out", required=True, type=Path, help="GGUF file to write")
    ap.add_argument("--outtype", default="f16", choices=["f32", "f16", "bf16", "q8_0"])
    a = ap.parse_args()
    export(a.adapter, a.out, a.outtype)
    print(f"export: wrote {a.out} ({a.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` once from the llama.cpp that the embedded engine runs, and
# caches the binary; prints the binary's path on stdout.
#
#   scripts/build-llama-server.sh   # -> ~/.cache/decisiond/llama-server/v0.5.0-de3ff81/llama-server
#
# The source: node-llama-cpp's npm package carries the llama.cpp release its own binaries are built
# from, as a git bundle (node_modules/node-llama-cpp/llama/gitRelease.bundle) with the patches it
# applies (llama/patches/); run `npm install` first. The cache key is that release's tag and
# commit, so a node-llama-cpp upgrade builds a new binary.
# Idempotent: exits at once when the binary is cached. Takes ~15–25 minutes on 2 shared cores.
# Environment: DECISIOND_CACHE (default ~/.cache/decisiond), LLAMA_SERVER_JOBS (default: nproc).
#
# Kernels: the binary runs on node-llama-cpp's prebuilt libllama, libggml and CPU variants (its
# npm package for this platform), so both engines run the same compiled code; the CPU flags below
# (ggml's table for the variant node-llama-cpp loads here) only matter where no prebuilt exists.
# Why: docs/decisions/047-same-probabilities-in-and-out-of-process.md
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LLAMA="$ROOT/node_modules/node-llama-cpp/llama"
BUNDLE="$LLAMA/gitRelease.bundle"
if [ ! -f "$BUNDLE" ] || [ ! -f "$LLAMA/llama.cpp.info.json" ]; then
  echo "build-llama-server: $BUNDLE is missing: run \`npm install\` in $ROOT first" >&2
  exit 1
fi
TAG="$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$LLAMA/llama.cpp.info.json")"
COMMIT="$(git bundle list-heads "$BUNDLE" | awk 'NR == 1 { print substr($1, 1, 7) }')"
VERSION="$TAG-$COMMIT"
CACHE="${DECISIOND_CACHE:-$HOME/.cache/decisiond}"
OUT="$CACHE/llama-server/$VERSION"
BIN="$OUT/llama-server"
JOBS="${LLAMA_SERVER_JOBS:-$(nproc)}"

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

log() { printf '[build-llama-server %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The ggml CPU variant node-llama-cpp would load here, as CMake flags (ggml/src/CMakeLists.txt,
# GGML_CPU_ALL_VARIANTS: the variant with the most features this CPU has wins).
cpu_flags() {
  local f
  f=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { [[ "$f" == *" $1 "* ]]; }
  local v=(-DGGML_SSE42=ON)
  if has avx && has f16c && has fma && has avx2 && has bmi2; then
    v+=(-DGGML_AVX=ON -DGGML_F16C=ON -DGGML_FMA=ON -DGGML_AVX2=ON -DGGML_BMI2=ON)
    if has avx512f; then
      v+=(-DGGML_AVX512=ON)
      has avx512vbmi && v+=(-DGGML_AVX512_VBMI=ON)
      has avx512_vnni && v+=(-DGGML_AVX512_VNNI=ON)
      has avx512_bf16 && v+=(-DGGML_AVX512_BF16=ON)
      has amx_tile && has amx_int8 && v+=(-DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON)
    elif has avx_vnni; then
      v+=(-DGGML_AVX_VNNI=ON)
    fi
  elif has avx; then
    v+=(-DGGML_AVX=ON)
    has f16c && v+=(-DGGML_F16C=ON)
    has fma && v+=(-DGGML_FMA=ON)
  fi
  echo "${v[@]}"
}

WORK="$CACHE/llama-server/build-$VERSION"
mkdir -p "$WORK" "$OUT"
# One build at a time across sessions sharing the cache.
exec 9>"$WORK.lock"
flock 9
if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

SRC="$WORK/llama.cpp"
rm -rf "$SRC"
log "checking out llama.cpp $VERSION from $BUNDLE"
git clone --quiet "$BUNDLE" "$SRC"
for patch in "$LLAMA"/patches/*.diff; do
  [ -f "$patch" ] || continue
  # node-llama-cpp skips a patch that its release already holds; so does this (it then fails).
  if git -C "$SRC" apply --ignore-whitespace "$patch" 2>/dev/null; then
    log "applied $(basename "$patch")"
  else
    log "skipped $(basename "$patch") (does not apply: already in this release)"
  fi
done

FLAGS="$(cpu_flags)"
log "configuring (GGML_NATIVE=OFF $FLAGS)"
# Shared libraries, each finding the others beside it ($ORIGIN), and the CPU backend as a module
# that ggml loads from the executable's folder: so that node-llama-cpp's own libraries can take
# the place of the ones built here.
# shellcheck disable=SC2086,SC2016
cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN' \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_OPENMP=OFF $FLAGS >&2
log "building llama-server with -j$JOBS"
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >&2

# The server and the libraries it loads, by their sonames.
STAGE="$WORK/stage"
mkdir -p "$STAGE"
cp "$WORK/build/bin/llama-server" "$WORK/build/bin/libggml-cpu.so" "$STAGE/"
for lib in "$WORK/build/bin"/lib*.so; do
  soname="$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
  if [ -n "$soname" ]; then cp -L "$lib" "$STAGE/$soname"; fi
done
# The same compiled kernels as the embedded engine: node-llama-cpp's prebuilt libllama, libggml,
# libggml-base and its CPU variants (ggml loads the best this CPU runs) replace the ones built
# here. Built from the same source by another compiler, the kernels differ by up to 0.2 in a
# log-probability (decision 047).
case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) arch="$(uname -m)" ;; esac
PREBUILT="$ROOT/node_modules/@node-llama-cpp/linux-$arch/bins/linux-$arch"
if [ -f "$PREBUILT/libggml-base.so" ] && ls "$PREBUILT"/libllama.v*.so >/dev/null 2>&1; then
  log "linking node-llama-cpp's prebuilt libraries from $PREBUILT"
  rm "$STAGE/libggml-cpu.so"
  cp "$PREBUILT"/libggml-base.so "$PREBUILT"/libggml.v*.so "$PREBUILT"/libllama.v*.so \
    "$PREBUILT"/libggml-cpu-*.so "$STAGE/"
  cp "$PREBUILT/libggml-base.so" "$STAGE/libggml-base.so.0"
  cp "$PREBUILT"/libggml.v*.so "$STAGE/libggml.so.0"
  cp "$PREBUILT"/libllama.v*.so "$STAGE/libllama.so.0"
  echo "node-llama-cpp prebuilt ($PREBUILT)" >"$STAGE/kernels.txt"
else
  log "no prebuilt node-llama-cpp libraries for linux-$arch: using the ones built here"
  echo "built here: $FLAGS" >"$STAGE/kernels.txt"
fi

rm -rf "$OUT"
mv "$STAGE" "$OUT"
rm -rf "$WORK"
log "cached $BIN"
echo "$BIN"

#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` once from the llama-cpp-python sdist on PyPI (the only place its
# source is reachable from here) and caches the binary; prints the binary's path on stdout.
#
#   scripts/build-llama-server.sh            # -> ~/.cache/decisiond/llama-server/0.3.36/llama-server
#
# Idempotent: exits at once when the binary is cached. Takes ~15–25 minutes on 2 shared cores.
# Environment: DECISIOND_CACHE (default ~/.cache/decisiond), LLAMA_SERVER_JOBS (default: nproc).
#
# CPU flags: node-llama-cpp's prebuilt linux-x64 binary ships every ggml CPU variant and loads the
# best one this CPU supports (on an AVX-512 machine, `zen4`); this build compiles only that same
# variant, chosen from /proc/cpuinfo with ggml's own table, so both engines run the same kernels.
# Why: docs/decisions/047-same-probabilities-in-and-out-of-process.md
set -euo pipefail

VERSION=0.3.36
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

SDIST="$CACHE/pip-sdist/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
  log "downloading llama-cpp-python==$VERSION sdist"
  mkdir -p "$CACHE/pip-sdist"
  python3 -m pip download --no-binary :all: --no-deps "llama-cpp-python==$VERSION" -d "$CACHE/pip-sdist" >&2
fi

SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  log "unpacking $SDIST"
  tar -xzf "$SDIST" -C "$WORK"
fi

FLAGS="$(cpu_flags)"
log "configuring (GGML_NATIVE=OFF $FLAGS)"
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_OPENMP=OFF $FLAGS >&2
log "building llama-server with -j$JOBS"
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >&2

cp "$WORK/build/bin/llama-server" "$BIN.tmp"
echo "$FLAGS" >"$OUT/cpu-flags.txt"
mv "$BIN.tmp" "$BIN"
rm -rf "$WORK"
log "cached $BIN"
echo "$BIN"

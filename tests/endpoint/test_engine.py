"""Engine acceptance: Prometheus parsing on recorded vLLM text, counter deltas, per-request fields.

vllm_metrics.txt is the /metrics excerpt pasted in https://github.com/vllm-project/vllm/pull/41916
(a vLLM server with speculation, Qwen3.6-35B-A3B-FP8), verbatim up to where the paste is cut.
vllm_metrics_dp.txt holds lines of the data-parallel capture in
https://github.com/vllm-project/vllm/pull/24049 (eight engines, n-gram), copied from its
Prometheus table with each " | " separator written as the exposition format's space.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specviz.endpoint.engine import (
    acceptance,
    counter_delta,
    parse_metrics,
    request_acceptance,
    spec_counters,
)

HERE = Path(__file__).parent


def test_recorded_vllm_text_reads_counters_and_not_their_created_gauges() -> None:
    samples = parse_metrics((HERE / "vllm_metrics.txt").read_text())
    assert len(samples) == 4  # two counters, two *_created gauges; comments skipped
    counters = spec_counters(samples)
    assert counters is not None
    # the *_created timestamps (1.78e9) are not summed in: the bug vLLM's own bench had
    assert counters["num_drafts"] == 6_491_797
    assert counters["num_draft_tokens"] == 6_491_797
    assert counters["num_accepted_tokens"] is None  # the paste ends before its value: absent
    assert counters["per_position"] == []


def test_data_parallel_engines_are_summed_and_positions_kept() -> None:
    counters = spec_counters(parse_metrics((HERE / "vllm_metrics_dp.txt").read_text()))
    assert counters is not None
    assert counters["num_drafts"] == 22 + 15
    assert counters["per_position"] == [7]


def _scrape(drafts: float, proposed: float, accepted: float, per_pos: list[float]) -> str:
    """Metric text in vLLM's shape, with _created gauges beside each counter."""
    label = 'engine="0",model_name="m"'
    lines = [
        f"vllm:spec_decode_num_drafts_total{{{label}}} {drafts}",
        f"vllm:spec_decode_num_drafts_created{{{label}}} 1.7e+09",
        f"vllm:spec_decode_num_draft_tokens_total{{{label}}} {proposed}",
        f"vllm:spec_decode_num_accepted_tokens_total{{{label}}} {accepted}",
        f"vllm:generation_tokens_total{{{label}}} 999",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="{i}"}} {v}'
        for i, v in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n"


def test_delta_around_a_run_gives_rate_and_mean_acceptance_length() -> None:
    before = spec_counters(parse_metrics(_scrape(100, 300, 150, [80, 50, 20])))
    after = spec_counters(parse_metrics(_scrape(110, 330, 165, [88, 55, 22])))
    delta = counter_delta(before, after)
    assert delta == {
        "num_drafts": 10,
        "num_draft_tokens": 30,
        "num_accepted_tokens": 15,
        "per_position": [8, 5, 2],
    }
    assert acceptance(delta) == {"rate": 0.5, "length": 2.5}


def test_a_counter_that_went_down_means_a_restart() -> None:
    before = spec_counters(parse_metrics(_scrape(100, 300, 150, [1])))
    after = spec_counters(parse_metrics(_scrape(5, 10, 2, [1])))
    with pytest.raises(ValueError, match="restarted"):
        counter_delta(before, after)


def test_missing_counters_are_absent_not_zero() -> None:
    plain = parse_metrics('vllm:generation_tokens_total{engine="0"} 12\n')
    assert spec_counters(plain) is None
    assert counter_delta(None, spec_counters(parse_metrics(_scrape(1, 2, 1, [])))) is None
    assert acceptance(None) == {"rate": None, "length": None}
    assert acceptance({"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0}) == {
        "rate": None,
        "length": None,
    }


def test_a_line_that_is_not_a_sample_is_refused_with_its_number() -> None:
    with pytest.raises(ValueError, match="line 2"):
        parse_metrics("# ok\n<html>not metrics</html> here too\n")


def test_per_request_fields_of_vllm_and_sglang() -> None:
    vllm = {  # vLLM's documented final usage chunk with --per-request-spec-decode-metrics
        "choices": [],
        "usage": {"completion_tokens": 53},
        "metrics": {
            "speculative_decoding": {
                "mean_acceptance_length": 1.2325581395348837,
                "draft_acceptance_rate": 0.07751937984496124,
                "acceptance_histogram": [39, 1, 0, 3],
                "num_spec_steps": 43,
                "num_accepted_draft_tokens": 10,
                "num_draft_tokens": 129,
                "num_spec_tokens": 3,
            }
        },
    }
    found = request_acceptance(vllm)
    assert found["vllm.draft_acceptance_rate"] == pytest.approx(10 / 129)
    assert found["vllm.mean_acceptance_length"] == pytest.approx(1 + 10 / 43)
    assert "vllm.acceptance_histogram" not in found  # lists are not numbers
    sglang = {  # SGLang's sglext chunk (request field return_spec_tokens_details)
        "choices": [],
        "sglext": {
            "spec_tokens_details": {
                "spec_accept_rate": 0.2930232558139535,
                "spec_accept_length": 2.4651162790697674,
                "spec_num_correct_drafts": 63,
                "spec_num_proposed_drafts": 215,
                "spec_verify_ct": 43,
                "spec_correct_drafts_histogram": [11, 14, 11, 4, 0, 3],
            }
        },
    }
    assert request_acceptance(sglang)["sglang.spec_verify_ct"] == 43
    assert request_acceptance({"choices": [{"text": "x"}], "metrics": None}) == {}
    assert request_acceptance({"metrics": {"speculative_decoding": None}}) == {}

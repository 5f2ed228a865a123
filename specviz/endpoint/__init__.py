"""Speculation measured on a served model: `specviz bench endpoint` (docs/serving.md).

client sends one timed request to an OpenAI-compatible server; engine reads acceptance as the
engine reports it (Prometheus counters, per-request fields); sweep runs the paired load sweep;
table and figure turn a saved section into the report's rows and plots.
"""

from specviz.endpoint.client import Endpoint, EndpointError, Job, Reply, send
from specviz.endpoint.engine import acceptance, counter_delta, parse_metrics, spec_counters
from specviz.endpoint.sweep import EndpointPlan, run_endpoint_sweep
from specviz.endpoint.table import endpoint_rows, render_endpoint, tpot, verdicts

__all__ = [
    "Endpoint",
    "EndpointError",
    "EndpointPlan",
    "Job",
    "Reply",
    "acceptance",
    "counter_delta",
    "endpoint_rows",
    "parse_metrics",
    "render_endpoint",
    "run_endpoint_sweep",
    "send",
    "spec_counters",
    "tpot",
    "verdicts",
]

"""The other speed-ups beside speculation: a model at lower precision, and how far it moves.

precision: a model loaded in fp32, bf16 or int8 (through torchao); distance: how far a
configuration's outputs are from the fp32 target's (greedy agreement, total variation).
"""

from specviz.quant.distance import (
    Agreement,
    greedy_agreement,
    mean_total_variation,
    next_token_probs,
    total_variation,
)
from specviz.quant.precision import (
    PRECISIONS,
    PrecisionError,
    load_at_precision,
    precision_problem,
    weight_bytes,
)

__all__ = [
    "PRECISIONS",
    "Agreement",
    "PrecisionError",
    "greedy_agreement",
    "load_at_precision",
    "mean_total_variation",
    "next_token_probs",
    "precision_problem",
    "total_variation",
    "weight_bytes",
]

"""A character tokenizer with a chat template, to see which ids a model was given."""

from __future__ import annotations

from transformers import PreTrainedTokenizerFast

from .conftest import char_tokenizer

# One user turn "ab" renders as "qab.!": q opens the turn, "." closes it, "!" opens the reply.
TEMPLATE = (
    "{% for m in messages %}q{{ m['content'] }}.{% endfor %}"
    "{% if add_generation_prompt %}!{% endif %}"
)


def templated_tokenizer() -> PreTrainedTokenizerFast:
    """The tests' character tokenizer, with TEMPLATE as its chat template."""
    tok = char_tokenizer()
    tok.chat_template = TEMPLATE
    return tok


def as_chat(text: str) -> str:
    """What TEMPLATE makes of one user turn of text, with the reply opened."""
    return f"q{text}.!"

"""How a prompt reaches the model: through the tokenizer's chat template, or as raw text.

An instruct model (the bundled SmolLM2-135M-Instruct, and its draft, distilled on chat-formatted
prompts) answers a request when the text arrives as a user turn with the assistant's turn
opened; sent as raw text it continues the text instead. Chat is the default wherever the
tokenizer has a template; raw=True (the app's "raw completion" switch, `--raw`) keeps the text.
"""

from __future__ import annotations

from typing import Any, Literal

PromptFormat = Literal["chat", "raw"]


def prompt_format(tokenizer: Any, *, raw: bool = False) -> PromptFormat:
    """'chat' when the prompt will be wrapped in the tokenizer's chat template, else 'raw'."""
    return "raw" if raw or not getattr(tokenizer, "chat_template", None) else "chat"


def prompt_ids(tokenizer: Any, text: str, *, raw: bool = False) -> list[int]:
    """Token ids of text as the model should see it: one user turn and the generation header
    (the same formatting the bundled draft was distilled on), or the raw text's own ids."""
    if not text.strip():
        raise ValueError("prompt is empty: give some text to continue")
    if prompt_format(tokenizer, raw=raw) == "raw":
        return list(tokenizer(text)["input_ids"])
    messages = [{"role": "user", "content": text}]
    chat = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(chat, add_special_tokens=False)["input_ids"])

"""Page text and the small browser script of the app (no torch, no gradio)."""

from __future__ import annotations

INTRO = """# specviz: speculative decoding, token by token
A draft model proposes γ tokens; the target scores them in one pass; each is kept with
probability min(1, p/q), the first rejected one is replaced by a draw from norm(max(0, p − q)),
and a bonus token follows when all are kept. Click or hover a token to see why."""
LAB_INTRO = """Is speculative sampling really the target's law? Draw N samples of the first k
tokens with speculative decoding and N with plain target sampling (prompt, γ, temperature,
top-k/top-p, drafter and seed from the controls on the left), and test equality in law with the
statistical suite. The toy pair's exact law is known, so it is tested too. Swap in a broken
sampler to watch the tests catch it."""
BATCH_INTRO = """Decode a few requests **together**, as a server does: every round each row drafts
its own γ tokens, one target pass scores all rows, and each row keeps its own number of them.
Row r draws from its own generator, seeded seed + r: it writes the very tokens Generate writes
for that prompt with seed seed + r and the same drafter, γ and temperature (top-k and top-p
off, fixed γ). *model:trimmed* drafts over the draft's top-ranked tokens only (the bundled
draft ships that ranking); *ngram* looks each row's next tokens up in its own text. A row's
"finished at" is that request's latency. The model pair is the form's (Model pair, left)."""
MUTANT_NOTE = """Warping mutants (`unprocessed_q`, `target_unwarped`) only differ from the real
sampler when temperature ≠ 1 or top-k / top-p is set; at T = 0 every sampler is deterministic."""
READY = "ready: press Generate (the first run loads the models; its progress shows here)"
SANS = ["ui-sans-serif", "system-ui", "sans-serif"]  # system fonts: no web fonts, works offline
MONO = ["ui-monospace", "Consolas", "monospace"]
CLICK_JS = """
const pick = (t) => {
  if (!t) return;
  element.querySelectorAll('.sv-selected').forEach((s) => s.classList.remove('sv-selected'));
  t.classList.add('sv-selected');
  trigger('click', {idx: Number(t.dataset.idx)});
};
element.addEventListener('click', (e) => pick(e.target.closest('[data-idx]')));
element.addEventListener('keydown', (e) => {
  if (e.key !== 'Enter' && e.key !== ' ') return;
  const t = e.target.closest('[data-idx]');
  if (t) { e.preventDefault(); pick(t); }
});
"""  # tokens are spans with data-idx: a click (or Enter on a focused token) inspects one
TREE_JS = """
const pick = (t) => {
  if (!t) return;
  element.querySelectorAll('.sv-selected').forEach((s) => s.classList.remove('sv-selected'));
  t.classList.add('sv-selected');
  trigger('click', {node: Number(t.dataset.node)});
};
element.addEventListener('click', (e) => pick(e.target.closest('[data-node]')));
element.addEventListener('keydown', (e) => {
  if (e.key !== 'Enter' && e.key !== ' ') return;
  const t = e.target.closest('[data-node]');
  if (t) { e.preventDefault(); pick(t); }
});
"""  # a tree's nodes are spans with data-node: a click (or Enter) inspects one

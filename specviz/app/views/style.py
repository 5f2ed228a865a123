"""Colours, labels and CSS shared by the token views and the plots (Okabe–Ito palette)."""

from __future__ import annotations

# Okabe & Ito (2008): distinguishable under the common colour-vision deficiencies. Each outcome
# also has a second, colour-free cue (strike-through, underline style, border) in CSS below.
COLORS = {
    "accepted": "#0072B2",  # blue
    "rejected": "#D55E00",  # vermillion
    "resampled": "#E69F00",  # orange
    "bonus": "#009E73",  # bluish green
    "sampled": "#999999",  # grey: plain decoding
}
# Every figure's colour cycle (settings, series): the same palette, vermillion last-but-one.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
LABELS = {
    "accepted": "accepted draft",
    "rejected": "rejected draft (struck through)",
    "resampled": "resampled from norm(max(0, p − q))",
    "bonus": "bonus token from p (all drafts kept)",
    "sampled": "plain decoding (sampled from p)",
}
LOSSY = "LOSSY: typical acceptance chose these tokens, so they do not follow the target's law"
CUES = {
    "accepted": "solid underline",
    "rejected": "strike-through, dashed box",
    "resampled": "double underline",
    "bonus": "solid box",
    "sampled": "no mark",
}

CSS = """
.sv-stream { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 15px; line-height: 2.1; white-space: pre-wrap; word-break: break-word;
  padding: 8px; min-height: 80px; }
.sv-prompt { color: #555; }
.sv-tok { cursor: pointer; border-radius: 3px; padding: 1px 0; margin: 0 1px; }
.sv-tok:hover, .sv-tok.sv-selected { outline: 2px solid #000; outline-offset: 1px; }
.sv-accepted { background: rgba(0,114,178,.18); border-bottom: 3px solid #0072B2; }
.sv-rejected { background: rgba(213,94,0,.14); color: #8a3c00; text-decoration: line-through;
  text-decoration-thickness: 2px; border: 1px dashed #D55E00; opacity: .85; }
.sv-resampled { background: rgba(230,159,0,.28); border-bottom: 4px double #B07A00; }
.sv-bonus { background: rgba(0,158,115,.20); border: 2px solid #009E73; }
.sv-sampled { background: rgba(153,153,153,.15); }
.sv-round { display: inline-block; font-size: 9px; line-height: 1; color: #666;
  border-left: 2px solid #888; padding: 0 2px 0 2px; margin: 0 2px; vertical-align: top; }
.sv-legend { display: flex; flex-wrap: wrap; gap: 6px 16px; font-size: 13px; padding: 4px 0; }
.sv-legend .sv-tok { cursor: default; padding: 1px 4px; }
.sv-inspector table, .sv-summary table { border-collapse: collapse; font-size: 13px; }
.sv-inspector table { width: 100%; }
.sv-inspector td, .sv-summary td { padding: 2px 10px 2px 0; vertical-align: top; }
.sv-inspector td:first-child, .sv-summary td:first-child { color: #555; white-space: nowrap; }
.sv-verdict { font-weight: 600; }
.sv-status-error { color: #b00020; font-weight: 600; }
.sv-race { display: flex; gap: 16px; }
.sv-race > div { flex: 1; border: 1px solid #ccc; border-radius: 6px; padding: 8px; }
.sv-race pre { white-space: pre-wrap; word-break: break-word; font-size: 13px; }
.sv-match { color: #006a4e; font-weight: 600; }
.sv-mismatch { color: #b00020; font-weight: 600; }
.sv-lab-table table { border-collapse: collapse; font-size: 13px; }
.sv-lab-table th, .sv-lab-table td { padding: 2px 8px; text-align: right; }
.sv-lab-table th:first-child, .sv-lab-table td:first-child { text-align: left; }
.sv-lab-table tr.sv-reject td:last-child { color: #b00020; font-weight: 700; }
.sv-lab-table tr.sv-pass td:last-child { color: #006a4e; }
.sv-sent { display: inline-block; font-family: ui-sans-serif, system-ui, sans-serif;
  font-size: 11px; line-height: 1.4; color: #555; border: 1px solid #bbb; border-radius: 3px;
  padding: 0 4px; }
.sv-note { color: #555; margin: 4px 0; }
.gradio-container { overflow-x: clip !important; overflow-y: visible !important; }
#sv-actions { position: sticky; top: 0; z-index: 30; align-items: center;
  background: var(--body-background-fill, #fff); padding: 6px 0;
  border-bottom: 1px solid var(--border-color-primary, #e5e5e5); }
#sv-actions button { white-space: nowrap; }
#sv-status { min-width: 240px; flex: 1 1 240px; }
#sv-status .sv-status, #sv-status .sv-status-error { font-size: 14px; padding: 2px 4px; }
#sv-drafter-note p, #sv-exit-note p, #sv-lab-mutant-note p { font-size: 13px; color: #444; }
#sv-bench-tables { max-height: 720px; overflow: auto; }
#sv-bench-tables table { display: block; overflow-x: auto; max-width: 100%; width: max-content; }
#sv-bench-tables th, #sv-bench-tables td { white-space: nowrap; padding: 2px 8px; }
.sv-lossy { background: #fff3cd; color: #6b4a00; border: 2px solid #b07a00; border-radius: 4px;
  padding: 4px 8px; margin: 0 0 6px 0; font-family: ui-sans-serif, system-ui, sans-serif;
  font-weight: 700; font-size: 14px; white-space: normal; }
.sv-batch-total { font-size: 14px; padding: 4px 0 8px 0; }
.sv-batch-rows { display: grid; grid-template-columns: repeat(auto-fill, minmax(380px, 1fr));
  gap: 10px; }
.sv-batch-row { border: 1px solid #ccc; border-radius: 6px; padding: 6px 8px; min-width: 0; }
.sv-batch-head { font-size: 13px; color: #333; border-bottom: 1px solid #eee;
  padding-bottom: 3px; }
.sv-batch-row .sv-stream { font-size: 13px; line-height: 1.9; min-height: 40px;
  max-height: 300px; overflow-y: auto; padding: 4px 0; }
#sv-batch-actions { align-items: center; }
#sv-batch-status { min-width: 240px; flex: 1 1 240px; }
.sv-tree-head { font-size: 13px; color: #444; margin: 2px 0 6px 0; }
.sv-tree-body { display: flex; flex-wrap: wrap; gap: 12px 24px; align-items: flex-start; }
.sv-tree-list, .sv-tree-list ul { list-style: none; margin: 0; padding-left: 18px; }
.sv-tree-list { padding-left: 0; font-family: ui-monospace, Consolas, monospace; font-size: 13px; }
.sv-tree-list ul { border-left: 1px solid #bbb; }
.sv-tree-list li { margin: 3px 0; }
.sv-node { display: inline-block; cursor: pointer; border-radius: 3px; padding: 0 4px;
  border: 1px solid transparent; }
.sv-node small { color: #666; font-size: 11px; }
.sv-node:hover, .sv-node.sv-selected { outline: 2px solid #000; outline-offset: 1px; }
.sv-node-root { cursor: default; color: #555; font-style: italic; }
.sv-node-kept { background: rgba(0,114,178,.22); border: 2px solid #0072B2; font-weight: 700; }
.sv-node-rejected { background: #eee; color: #777; text-decoration: line-through;
  border: 1px solid #bbb; }
.sv-node-untried { color: #555; border: 1px dotted #888; background: #fff; }
.sv-node-next { border-width: 2px; }
.sv-mask { border-collapse: collapse; font-size: 11px; font-family: ui-monospace, monospace; }
.sv-mask caption { caption-side: top; text-align: left; font-size: 12px; color: #555;
  font-family: ui-sans-serif, system-ui, sans-serif; max-width: 420px; padding-bottom: 4px; }
.sv-mask th, .sv-mask td { border: 1px solid #ddd; min-width: 14px; height: 14px; padding: 0 2px;
  text-align: center; }
.sv-mask th { font-weight: 400; color: #555; white-space: nowrap; }
.sv-mask td.sv-on { background: rgba(0,0,0,.08); }
.sv-mask tr.sv-mask-kept th { font-weight: 700; color: #0072B2; }
.sv-mask tr.sv-mask-kept td.sv-on { background: rgba(0,114,178,.45); color: #003b5c; }
.sv-mask tr.sv-mask-rejected th { color: #999; text-decoration: line-through; }
.sv-tree-inspector table { border-collapse: collapse; font-size: 13px; width: 100%; }
.sv-tree-inspector td, .sv-tree-inspector th { padding: 2px 10px 2px 0; vertical-align: top;
  text-align: left; }
.sv-tree-inspector td:first-child { color: #555; white-space: nowrap; }
.sv-round-detail { font-size: 13px; }
.sv-round-detail p { margin: 4px 0; }
.sv-tally { color: #444; border-bottom: 1px solid #eee; padding-bottom: 3px; }
.sv-candidate, .sv-xtok { font-family: ui-monospace, Consolas, monospace; white-space: pre; }
.sv-spec-tree, .sv-spec-tree ul { list-style: none; margin: 0; padding-left: 18px;
  font-family: ui-monospace, Consolas, monospace; }
.sv-spec-tree ul { border-left: 1px solid #bbb; }
.sv-spec-tree span { display: inline-block; border-radius: 3px; padding: 0 4px; margin: 1px 0;
  white-space: pre; border: 1px dotted #888; }
.sv-spec-tree small { color: #555; font-size: 11px; }
.sv-spec-tree .sv-spec-kept { background: rgba(0,114,178,.22); border: 2px solid #0072B2;
  font-weight: 700; }
.sv-xtok { display: inline-block; border: 1px solid #bbb; border-radius: 3px; padding: 0 3px;
  margin: 1px; }
.sv-xtok-proposed { background: rgba(0,114,178,.18); border-color: #0072B2; }
.sv-xtok-stable { border-style: solid; }
.sv-xtok-unstable { color: #777; border-style: dashed; }
.sv-memory { font-size: 13px; padding: 2px 0; }
"""

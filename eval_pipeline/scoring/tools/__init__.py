"""Agent tool calls (docs/metrics.md#tool-calls, docs/agent_lane.md): the `tool_scores` and `tool_call_diffs` tables.

Everything is scored from structured `tool_call` steps, never from prose. A call is identified by its canonical
key `name(args)` (frames.call_key). Metrics use the matched path: the reference or the alternative with the
highest tool_call_f1 (ties: the reference, then the earlier alternative). Failed and timed-out calls are calls.

Readings this package fixes (docs/agent_lane.md repeats them for users):
- precision = matched / calls (null without calls); recall = matched / path calls (null for an empty path);
  f1 = 2·matched / (calls + path calls), the harmonic mean where both are defined, null when both are empty
  (an empty path met by no calls ranks as a perfect match when choosing the path).
- A call matches a path call of its tool when its args match under the value rules (scoring/values.py): by
  default canonical JSON equality (key order and 49.0 vs 49 do not matter), with the BFCL form's per-argument
  accepted values and optional arguments where the case gives them. The k-th call of a class of identical path
  calls matches the k-th path call of that class; overlapping classes fall back to a maximum matching.
- Schema checks use the tool registry; with an empty registry only reference values are checked; a tool
  missing from a non-empty registry fails its schema check and is an `unknown_tool` at tool_selection (never a
  policy breach of allowed_tools, never incomplete). Read-only calls need only their schema.
- tool_selection counts calls per non-read-only tool against the matched path (a duplicate is a surplus);
  read-only path tools are optional.
- `tool_order` is not_applicable for an `unordered` case without dependencies (nothing to order).
- For `strict_order`, the calls matched to path calls (k-th call of a key to the k-th path call of that key)
  must come in path order; extra calls and retries do not break the order.
- Scope: the case's `scope` maps an argument name to its allowed values (a list, or one value). Any argument
  of that name, at any depth of a call's args, holding another value is a policy violation.
- Fault facts used by outcome_scores are computed here because they are call-sequence facts that need the
  registry: the fault strikes the first call of `fault.tool`; a re-check is a later read-only call with
  status `ok`; an `unsafe_after_fault` call after the fault with no re-check in between is an unsafe action.
"""

from eval_pipeline.scoring.tools.score import score_tools

__all__ = ["score_tools"]

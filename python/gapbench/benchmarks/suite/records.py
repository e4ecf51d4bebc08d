"""Seed suites: the records every runner (torch, TensorFlow, llama.cpp) makes the same way."""
from __future__ import annotations

from gapbench.core.result import FAILED, Record


def failed_check(base: dict, detail: str, params: dict, device: dict) -> list[Record]:
    """The row of a case whose check before timing failed: recorded as failed, never timed."""
    return [Record(**base, metric="step", status=FAILED, verified=False, verify_detail=detail, params=params,
                   reason="the check before timing failed: " + detail, device=device)]


def generation_records(base, params, device, who, P, N, first, rest, counted, warmup) -> list[Record]:
    """The prefill and generate records of a generation case, after checking that every
    repetition produced exactly N token ids (counted from the ids, not from text)."""
    if any(n != N for n in counted):
        return [Record(**base, metric="generate", status=FAILED, reason=f"asked {N} tokens, got {counted}", params=params,
                       device=device)]
    params.update(generated_tokens=counted)
    common = dict(base, clock="host_wall", device=device, verified=True,
                  verify_detail=f"{who} returned exactly {N} new token ids each time", warmup=warmup)
    return [Record(**common, metric="prefill", samples_s=first, op=f"prompt processing of {P} tokens + the first new token",
                   work={"items": P}, params=params),
            Record(**common, metric="generate", samples_s=rest, op=f"generation of {N - 1} tokens after the first",
                   work={"items": N - 1}, params={k: params[k] for k in ("label", "case", "suite")})]

"""GPT-2 sizes and the analytic cost of the minimal GPT-2 (shared by the torch and MLX builds).

The sizes are those of OpenAI's released checkpoints (gpt2, -medium, -large, -xl); "tiny" is a
test configuration that trains in milliseconds on a CPU."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GPT2Spec:
    n_layer: int
    n_head: int
    n_embd: int
    vocab: int = 50257
    n_ctx: int = 1024

    def to_dict(self) -> dict:
        return asdict(self)

    def params(self) -> int:
        """Parameters of the minimal GPT-2 (tied input/output embedding, biases, two LayerNorms
        per block and a final one): 124.4M for gpt2, 774.0M for gpt2-large, 1557.6M for gpt2-xl."""
        d, L = self.n_embd, self.n_layer
        block = (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 2 * 2 * d
        return self.vocab * d + self.n_ctx * d + L * block + 2 * d

    def train_flops(self, batch: int, seq: int) -> float:
        """Matmul FLOPs of one forward + backward pass over batch x seq tokens: each weight
        matmul costs 2 (forward) + 4 (both gradients) FLOPs per weight per token; attention's two
        batched products (QK^T, AV) are counted in full (T x T, as torch's flop counter does),
        with the same 1 + 2 split; the tied output projection is a weight matmul. Elementwise
        ops, softmax and the optimizer are not counted (below 1% at GPT-2 sizes)."""
        d, L, T, B = self.n_embd, self.n_layer, seq, batch
        weights = L * (d * 3 * d + d * d + 2 * d * 4 * d) + d * self.vocab
        attn = L * 2 * (2 * B * T * T * d)  # QK^T and AV, forward
        return 3.0 * (2.0 * weights * B * T + attn)


SIZES = {
    "tiny": GPT2Spec(n_layer=2, n_head=2, n_embd=64, vocab=512, n_ctx=128),
    "gpt2": GPT2Spec(12, 12, 768),
    "gpt2-medium": GPT2Spec(24, 16, 1024),
    "gpt2-large": GPT2Spec(36, 20, 1280),
    "gpt2-xl": GPT2Spec(48, 25, 1600),
}

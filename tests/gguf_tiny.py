"""A tiny Llama GGUF written with the `gguf` package, for testing the llama.cpp path for real:
2 blocks, 32-wide, a 300-token SentencePiece-style vocabulary (3 specials, 256 byte tokens,
41 words), random fp32 weights."""
from __future__ import annotations

import numpy as np


def write_tiny_llama_gguf(path, seed: int = 0, dim: int = 32, layers: int = 2, heads: int = 2, ff: int = 64, ctx: int = 256) -> int:
    import gguf

    rng = np.random.default_rng(seed)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)] + [f"\u2581w{i}" for i in range(41)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256 \
        + [gguf.TokenType.NORMAL] * 41
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("gapbench-tiny-llama")
    w.add_context_length(ctx)
    w.add_embedding_length(dim)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(dim // heads)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(41)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def t(name, *shape, scale=0.02):
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    t("token_embd.weight", vocab, dim)
    for b in range(layers):
        w.add_tensor(f"blk.{b}.attn_norm.weight", np.ones(dim, np.float32))
        for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
            t(f"blk.{b}.{n}.weight", dim, dim)
        w.add_tensor(f"blk.{b}.ffn_norm.weight", np.ones(dim, np.float32))
        t(f"blk.{b}.ffn_gate.weight", ff, dim)
        t(f"blk.{b}.ffn_up.weight", ff, dim)
        t(f"blk.{b}.ffn_down.weight", dim, ff)
    w.add_tensor("output_norm.weight", np.ones(dim, np.float32))
    t("output.weight", vocab, dim)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return vocab

"""A random-weight llama-architecture GGUF that a real llama-server loads and serves.

The output is noise; what matters is that the server runs its real code paths: slots,
metrics, props, the queue. The vocabulary is SentencePiece-style with byte fallback, so
any prompt tokenizes, and the chat template is ChatML, so /v1/chat/completions works.
Written with llama.cpp's own gguf-py (the `gguf` package), which knows the key names and
the tensor layout of the version it ships with.
"""

from dataclasses import dataclass
from pathlib import Path

from lab.realengines import CHATML, WORDS

# Bumped when what write() produces changes: the cached models are keyed on it.
VERSION = 2


@dataclass(frozen=True)
class Shape:
    """How big a model: `small` loads in a blink for format tests; `busy` keeps a slot
    busy for seconds per request on one thread."""

    name: str
    layers: int
    width: int
    heads: int
    ffn: int
    context: int


SMALL = Shape("tiny-llama", layers=2, width=64, heads=4, ffn=128, context=2048)
BUSY = Shape("busy-llama", layers=8, width=1024, heads=16, ffn=2048, context=4096)


def vocabulary() -> tuple[list[str], list[int], list[float]]:
    # gguf (and numpy) come with the `engines` extra, imported where they are used: the
    # shapes above are read by tests that skip, saying why, where nothing was built.
    import gguf

    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [
        gguf.TokenType.UNKNOWN,
        gguf.TokenType.CONTROL,
        gguf.TokenType.CONTROL,
        gguf.TokenType.CONTROL,
        gguf.TokenType.CONTROL,
    ]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    pieces = ["▁"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["▁" + w for w in WORDS]
    tokens += pieces
    types += [gguf.TokenType.NORMAL] * len(pieces)
    # SentencePiece merges by score: longer pieces first.
    scores = [0.0] * (len(tokens) - len(pieces)) + [-1.0 / len(p) for p in pieces]
    return tokens, [int(t) for t in types], scores


def write(path: Path, shape: Shape, seed: int = 42) -> Path:
    import gguf
    import numpy as np

    tokens, types, scores = vocabulary()
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(shape.name)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.width)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.heads)
    writer.add_rope_dimension_count(shape.width // shape.heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_scores(scores)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_eot_token_id(4)
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHATML)

    def tensor(name: str, *dims: int, ones: bool = False) -> None:
        # numpy's order is the reverse of ggml's: (rows = outputs, columns = inputs).
        data = (
            np.ones(dims, dtype=np.float32)
            if ones
            else rng.normal(0.0, 0.02, size=dims).astype(np.float16)
        )
        writer.add_tensor(name, data)

    width, vocab = shape.width, len(tokens)
    tensor("token_embd.weight", vocab, width)
    for layer in range(shape.layers):
        block = f"blk.{layer}"
        tensor(f"{block}.attn_norm.weight", width, ones=True)
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"{block}.{part}.weight", width, width)
        tensor(f"{block}.ffn_norm.weight", width, ones=True)
        tensor(f"{block}.ffn_gate.weight", shape.ffn, width)
        tensor(f"{block}.ffn_up.weight", shape.ffn, width)
        tensor(f"{block}.ffn_down.weight", width, shape.ffn)
    tensor("output_norm.weight", width, ones=True)
    tensor("output.weight", vocab, width)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

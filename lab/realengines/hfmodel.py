"""A random-weight LlamaForCausalLM with a byte-level BPE tokenizer trained here, saved as a
Hugging Face folder that vLLM serves on CPU. Run with the vLLM virtualenv's Python (it has
torch, transformers and tokenizers), from the repository's root:
`python -m lab.realengines.hfmodel OUT`. Output is noise.
"""

import random
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from lab.realengines import CHATML, WORDS


def main(out: Path) -> None:
    random.seed(0)
    torch.manual_seed(0)
    text = [" ".join(random.choices(WORDS, k=random.randint(5, 20))) for _ in range(5000)]
    special = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(
        text,
        trainers.BpeTrainer(
            vocab_size=600,
            special_tokens=special,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<unk>",
        chat_template=CHATML,
    )
    fast.model_max_length = 512
    fast.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=64,  # vLLM's CPU attention wants 64-wide heads
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(out, safe_serialization=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""Real engines on this machine's CPU: llama-server built from source and a generated model
(lab/realengines/build.py), started and driven for the tests (lab/realengines/server.py)."""

# The chat template both generated models carry (ChatML, as Qwen's): a completion check's
# /v1/chat/completions then renders the way it does against real deployments.
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# The words both generated vocabularies know, so a prompt tokenizes into whole words.
WORDS = (
    "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "was", "with", "as",
    "be", "at", "by", "this", "had", "not", "are", "but", "from", "or", "have", "an",
    "they", "which", "one", "you", "were", "all", "there", "would", "their", "we", "been",
    "has", "when", "who", "will", "more", "no", "if", "out", "so", "said", "what", "up",
    "its", "a", "memory", "night", "slot", "queue", "engine", "model", "token", "cache",
    "server", "request",
)  # fmt: skip

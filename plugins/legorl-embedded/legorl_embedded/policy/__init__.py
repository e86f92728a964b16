"""The embedded policy model and what sampling and training share on it: building it
from config, its tokenizer and chat template, the ids it emits, router capture and replay,
log-probs."""

"""lego-rl inference on a vLLM server: token ids in, ids + log-probs + routed experts out."""

"""The embedded inference plugins: ``hf`` (KV-cached sampling with continuous batching and
routing capture) and ``scripted`` (scripted replies scored by the real model); the
inference benchmark."""

"""The embedded trainer, the warm start's supervised pass, resumable state, and the
consistency benchmark."""

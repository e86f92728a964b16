"""The embedded optimizer plugins (``grpo``, ``gspo``, ``ppo``), the surrogate pieces they
share, rollout correction, the token batch they see and the consistency figures."""

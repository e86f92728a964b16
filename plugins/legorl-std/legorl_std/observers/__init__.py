"""Observers: the run store, JSONL log, dashboard, TensorBoard, W&B."""

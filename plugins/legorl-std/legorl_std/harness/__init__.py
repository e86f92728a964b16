"""The scripted harness (fixed commands, no model)."""

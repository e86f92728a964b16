"""Task sources: Harbor task directories and the generated bugfix tasks."""

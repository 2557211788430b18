"""redrive."""

"""The README, docs/ and examples/: what they name exists, what they show runs."""

"""What the tests share and that is not a test: front ends, scenarios, fakes, helpers."""

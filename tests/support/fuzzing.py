"""Shared settings of the property tests (tests/test_fuzz_*.py): deterministic and quick.

Run them with the statistics that docs/robustness.md quotes:
`.venv/bin/pytest tests/test_fuzz_*.py --hypothesis-show-statistics`
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=300,
    derandomize=True,  # the same cases on every run, in CI too
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Any JSON-like value, as a decoder may meet it in untrusted input.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(),
    st.text(),
    st.binary(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)

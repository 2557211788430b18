"""The circuit breaker on a fake clock: closed, open, half-open, and back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqsbatch._core.circuit import Admission, Circuit, CircuitState


def opened_by_failures(failures: int = 3) -> Circuit:
    circuit = Circuit(failures=failures, probe_size=2, open_seconds=30)
    for _ in range(failures - 1):
        assert circuit.record(0.0, failed=True) is None
    change = circuit.record(0.0, failed=True)
    assert change is not None and change.opened
    assert change.line() == f"circuit open for 30 s ({failures} failed batches in a row)"
    return circuit


def test_closed_lets_every_receive_through() -> None:
    circuit = Circuit(failures=None, probe_size=1)
    assert circuit.admit(0.0) == Admission(may_receive=True)
    for _ in range(100):  # off by default: failures alone never open it
        assert circuit.record(0.0, failed=True) is None
    assert circuit.state is CircuitState.CLOSED


def test_failures_in_a_row_open_it_and_a_success_resets_the_count() -> None:
    circuit = Circuit(failures=3, probe_size=1)
    circuit.record(0.0, failed=True)
    circuit.record(0.0, failed=True)
    circuit.record(0.0, failed=False)
    circuit.record(0.0, failed=True)
    assert circuit.record(0.0, failed=True) is None  # 2 in a row, not 4 in all
    assert circuit.state is CircuitState.CLOSED
    opened_by_failures(3)


def test_open_refuses_until_its_time_then_one_probe_of_probe_size() -> None:
    circuit = opened_by_failures()
    assert circuit.admit(10.0) == Admission(may_receive=False, wait=20.0)
    probe = circuit.admit(30.0)
    assert probe.may_receive and probe.probe and probe.at_most == 2
    assert probe.change is not None and probe.change.after is CircuitState.HALF_OPEN
    # a second receiver waits for the probe's result
    assert circuit.admit(31.0) == Admission(may_receive=False, wait=None)
    change = circuit.record(32.0, failed=False, probe=True)
    assert change is not None and change.after is CircuitState.CLOSED
    assert change.line() == "circuit closed (the probe batch succeeded)"
    assert circuit.admit(33.0) == Admission(may_receive=True)


def test_a_failed_probe_opens_it_again_for_twice_as_long_up_to_the_cap() -> None:
    circuit = Circuit(failures=1, probe_size=1, open_seconds=30, max_open_seconds=200)
    circuit.record(0.0, failed=True)
    now, open_times = 0.0, []
    for _ in range(5):
        now += 10_000
        assert circuit.admit(now).probe
        change = circuit.record(now, failed=True, probe=True)
        assert change is not None and change.until is not None
        open_times.append(change.until - now)
    assert open_times == [60, 120, 200, 200, 200]
    now += 10_000
    circuit.admit(now)
    circuit.record(now, failed=False, probe=True)  # closed: the backoff starts over
    circuit.record(now, failed=True)
    assert circuit.admit(now + 29.9).may_receive is False
    assert circuit.admit(now + 30).probe


def test_overloaded_opens_it_for_retry_after_even_with_failures_off() -> None:
    circuit = Circuit(failures=None, probe_size=1, open_seconds=30)
    change = circuit.record(5.0, failed=False, overloaded=True, retry_after=120)
    assert change is not None and change.until == 125.0
    assert change.line() == "circuit open for 120 s (a handler raised Overloaded)"
    assert not circuit.admit(124.9).may_receive
    # a batch received before it opened, overloaded too, holds it open longer
    assert circuit.record(100.0, failed=True, overloaded=True, retry_after=60) is None
    assert not circuit.admit(159.0).may_receive
    assert circuit.admit(160.0).probe
    again = circuit.record(161.0, failed=False, overloaded=True, retry_after=5, probe=True)
    assert again is not None and again.until == 161.0 + 60  # the backoff beats a shorter hint


def test_a_probe_that_got_nothing_lets_the_next_receive_probe() -> None:
    circuit = opened_by_failures()
    assert circuit.admit(30.0).probe
    circuit.probe_unused()
    assert circuit.admit(31.0).probe


def test_results_of_batches_from_before_it_opened_do_not_close_it() -> None:
    circuit = opened_by_failures()
    assert circuit.record(1.0, failed=False) is None
    assert circuit.state is CircuitState.OPEN
    circuit.admit(30.0)
    assert circuit.record(30.5, failed=False) is None  # not the probe
    assert circuit.state in {CircuitState.HALF_OPEN}


@pytest.mark.parametrize(("failures", "probe_size"), [(0, 1), (1, 0)])
def test_bad_settings(failures: int, probe_size: int) -> None:
    with pytest.raises(ValueError, match="invalid"):
        Circuit(failures=failures, probe_size=probe_size)


events = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=100),
        st.sampled_from(["ok", "failed", "overloaded", "empty"]),
    ),
    max_size=80,
)


@given(events)
def test_while_not_closed_at_most_one_probe_is_out_and_no_receive_is_unbounded(
    plan: list[tuple[float, str]],
) -> None:
    circuit = Circuit(failures=2, probe_size=3, open_seconds=10, max_open_seconds=80)
    now, probes_out = 0.0, 0
    for elapsed, outcome in plan:
        now += elapsed
        admitted = circuit.admit(now)
        if admitted.may_receive and circuit.state is not CircuitState.CLOSED:
            assert admitted.probe and admitted.at_most == 3
            probes_out += 1
        assert probes_out <= 1
        if not admitted.may_receive:
            assert admitted.wait is None or 0 < admitted.wait <= 80 + 1e-6  # the cap
            continue
        if outcome == "empty" and admitted.probe:
            circuit.probe_unused()
            probes_out = 0
            continue
        change = circuit.record(
            now,
            failed=outcome == "failed",
            overloaded=outcome == "overloaded",
            retry_after=None,
            probe=admitted.probe,
        )
        if admitted.probe:
            probes_out = 0
            assert change is not None
            assert change.after is (
                CircuitState.CLOSED if outcome in ("ok", "empty") else CircuitState.OPEN
            )


def test_overloaded_carries_its_retry_after() -> None:
    from sqsbatch import Overloaded, SqsBatchError  # noqa: PLC0415 - the public name

    assert Overloaded(retry_after=30).retry_after == 30.0
    assert str(Overloaded(retry_after=2.5)) == "overloaded: retry after 2.5 s"
    assert Overloaded().retry_after is None and str(Overloaded()) == "overloaded"
    assert isinstance(Overloaded(1), SqsBatchError)


@pytest.mark.parametrize("bad", [-1, 43_201, True, "30", float("nan")])
def test_overloaded_refuses_a_nonsense_retry_after_in_one_line(bad: object) -> None:
    from sqsbatch import Overloaded  # noqa: PLC0415

    with pytest.raises(ValueError, match=r"retry_after=.* is invalid \(accepted: seconds 0..43200"):
        Overloaded(retry_after=bad)  # type: ignore[arg-type]

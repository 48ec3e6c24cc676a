"""`python -m e2e.bench scheduler --shapes`: which of scheduler_perf's shapes a run measures (create latency is
measured in every run, before the shapes, so a short run still has `create_overhead_p99_ms`)."""

from __future__ import annotations

import pytest

from e2e.bench import __main__ as bench_main
from e2e.bench import scheduler


def test_the_cli_offers_exactly_the_benchmarks_shapes() -> None:
    assert bench_main.SCHEDULER_SHAPES == scheduler.SHAPES


@pytest.mark.parametrize(("given", "measured"), [
    ("empty", ("empty",)),
    ("full,empty", ("empty", "full")),  # the fill only grows, so shapes run emptiest first whatever the order
    (" half , half", ("half",)),
])
def test_shapes_are_parsed_in_fill_order(given: str, measured: tuple[str, ...]) -> None:
    assert bench_main._shapes(given) == measured


@pytest.mark.parametrize(("given", "named"), [("bogus", "bogus"), ("empty,nearly-full", "nearly-full"),
                                               ("", "''"), (",", "','")])
def test_an_unknown_shape_is_refused_by_name(given: str, named: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_main.main(["scheduler", "--shapes", given])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --shapes: unknown shape {named}: choose from empty, half, full" in err


@pytest.mark.parametrize(("given", "said"), [("0", "must be 1 or more, not 0"), ("-2", "must be 1 or more, not -2"),
                                             ("two", "not a whole number: 'two'")])
def test_a_bad_pair_count_is_refused_with_what_is_wrong(given: str, said: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_main.main(["scheduler", "--pairs", given])
    assert exit_.value.code == 2
    assert f"argument --pairs: {said}" in capsys.readouterr().err

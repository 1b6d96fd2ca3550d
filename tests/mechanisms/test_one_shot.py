"""A one-shot view of a mechanism draws once: a charge of its event pays for one draw, so a second draw,
a draw on a copy (copy, deepcopy, pickle) or in a forked child is refused and releases nothing."""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
import threading

import pytest

from dp_pipeline.exceptions import InvalidParameterError, MechanismSpentError
from dp_pipeline.mechanisms import Exponential, Gaussian, Laplace, OneShot
from dp_pipeline.mechanisms.sampling import fast_rng


def _views() -> list[OneShot]:
    return [Laplace(epsilon=0.5, sensitivity=1.0).one_shot(), Gaussian.from_mu(0.5, 1.0).one_shot()]


@pytest.mark.parametrize("view", _views(), ids=["laplace", "gaussian"])
def test_a_second_draw_is_refused(view: OneShot) -> None:
    first = view.randomize(10.0)
    assert isinstance(first, float) and view.spent
    with pytest.raises(MechanismSpentError):
        view.randomize(10.0)


def test_the_view_reads_as_its_mechanism_and_cannot_be_changed() -> None:
    mechanism = Laplace(epsilon=0.5, sensitivity=2.0)
    view = mechanism.one_shot()
    assert view.event == mechanism.event and view.scale == 4.0 and view.mechanism_type is Laplace
    with pytest.raises(AttributeError):
        view.epsilon = 5.0  # type: ignore[misc]


@pytest.mark.parametrize("make_copy", [copy.copy, copy.deepcopy, lambda v: pickle.loads(pickle.dumps(v))])
def test_a_copy_cannot_draw_and_the_original_still_draws_once(make_copy) -> None:
    view = Laplace(epsilon=0.5, sensitivity=1.0).one_shot()
    copied = make_copy(view)
    with pytest.raises(MechanismSpentError):
        copied.randomize(1.0)
    view.randomize(1.0)
    with pytest.raises(MechanismSpentError):
        view.randomize(1.0)


def test_select_is_a_draw_too() -> None:
    view = Exponential(epsilon=1.0, sensitivity=1.0).one_shot()
    view.select([1.0, 2.0, 3.0])
    with pytest.raises(MechanismSpentError):
        view.randomize([1.0, 2.0, 3.0])


def test_invalid_input_does_not_spend_the_view() -> None:
    view = Laplace(epsilon=0.5, sensitivity=1.0).one_shot()
    with pytest.raises(InvalidParameterError):
        view.randomize(float("nan"))
    assert not view.spent
    view.randomize(1.0)


def _draw_in_child(view: OneShot, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        view.randomize(1.0)
        queue.put("drew")
    except MechanismSpentError:
        queue.put("refused")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.processes
def test_a_forked_child_cannot_draw() -> None:
    view = Laplace(epsilon=0.5, sensitivity=1.0).one_shot()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_draw_in_child, args=(view, queue))
    child.start()
    child.join(30)
    assert queue.get(timeout=5) == "refused"
    view.randomize(1.0)  # the parent's one draw


def test_racing_threads_draw_once() -> None:
    view = Laplace(epsilon=0.5, sensitivity=1.0).one_shot()
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def draw() -> None:
        start.wait()
        try:
            view.randomize(1.0)
            outcomes.append("drew")
        except MechanismSpentError:
            outcomes.append("refused")

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["drew"] + ["refused"] * 7


@pytest.mark.parametrize("by_keyword", [True, False], ids=["rng=", "positional"])
def test_a_fast_generator_is_refused_and_leaves_the_view_unspent(by_keyword: bool) -> None:
    # The charge was recorded before the draw, unmarked: a fast_rng draw would be an unmarked fast release.
    view = Laplace(epsilon=0.5, sensitivity=1.0).one_shot()
    with pytest.raises(InvalidParameterError, match="secure sampler only"):
        if by_keyword:
            view.randomize(1.0, rng=fast_rng(3))
        else:
            view.randomize(1.0, fast_rng(3))
    assert not view.spent
    assert isinstance(view.randomize(1.0), float) and view.spent

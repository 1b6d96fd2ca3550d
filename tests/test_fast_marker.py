"""Every place where the library both charges and draws marks a release drawn with ``fast_rng`` on the ledger
(``sampler="fast"``), at the same price as the secure release; the history and the command show it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.cli import app
from dp_pipeline.exceptions import PrivacyLeakWarning
from dp_pipeline.frames import add_noise, dp_count, dp_mean, randomized_response
from dp_pipeline.mechanisms import fast_rng, secure_rng
from dp_pipeline.transformers import LaplaceNoise

pytestmark = pytest.mark.filterwarnings("ignore::dp_pipeline.exceptions.FastSamplerWarning")

FRAME = pd.DataFrame({"x": np.linspace(0.0, 10.0, 40), "yes": [True, False] * 20})


def _acct(url: str = "memory://") -> PrivacyAccountant:
    acct = PrivacyAccountant(url)
    acct.set_budget("d", PureDP(100.0))
    return acct


def _releases(acct: PrivacyAccountant, rng_of: Callable[[], np.random.Generator]) -> None:
    """Four releases through the frame functions, each drawing from ``rng_of()``."""
    ledger = {"epsilon": 0.5, "accountant": acct, "dataset": "d"}
    FRAME.pipe(add_noise, ["x"], lower=0, upper=10, random_state=rng_of(), **ledger)
    FRAME.pipe(randomized_response, "yes", random_state=rng_of(), **ledger)
    FRAME.pipe(dp_count, random_state=rng_of(), **ledger)
    FRAME.pipe(dp_mean, "x", lower=0, upper=10, random_state=rng_of(), **ledger)


def test_the_frame_functions_mark_fast_releases_at_the_secure_price() -> None:
    fast, secure = _acct(), _acct()
    _releases(fast, lambda: fast_rng(1))
    _releases(secure, lambda: secure_rng(1))
    assert [e.sampler for e in fast.history("d")] == ["fast"] * 4
    assert [e.sampler for e in secure.history("d")] == [None] * 4
    assert [e.cost for e in fast.history("d")] == [e.cost for e in secure.history("d")]
    assert fast.spent("d").epsilon == secure.spent("d").epsilon == 2.0  # four ε = 0.5 releases
    fast.verify()


def test_a_transformer_marks_its_fast_releases() -> None:
    acct = _acct()
    X = FRAME[["x"]].to_numpy()
    with pytest.warns(PrivacyLeakWarning):  # a kept generator is repeated by every copy (as before)
        noise = LaplaceNoise(epsilon=0.5, lower=0.0, upper=10.0, accountant=acct, dataset="d",
                             random_state=fast_rng(3))  # fmt: skip
        noise.fit_transform(X)
    noise.transform(X)
    LaplaceNoise(epsilon=0.5, lower=0.0, upper=10.0, accountant=acct, dataset="d").fit_transform(X)
    assert [e.sampler for e in acct.history("d")] == ["fast", "fast", None]
    assert len({e.cost for e in acct.history("d")}) == 1
    acct.verify()


def test_the_command_shows_fast_releases(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    acct = _acct(url)
    FRAME.pipe(dp_count, epsilon=0.5, accountant=acct, dataset="d", random_state=fast_rng(1))
    FRAME.pipe(dp_count, epsilon=0.5, accountant=acct, dataset="d")
    acct.close()
    runner = CliRunner()
    shown = runner.invoke(app, ["budget", "history", "d", "--ledger", url], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    rows = [line for line in shown.output.splitlines() if "dp_count" in line]
    assert len(rows) == 2 and "fast" in rows[0] and "fast" not in rows[1]
    assert "not floating-point safe" in shown.output
    as_json = runner.invoke(app, ["budget", "history", "d", "--ledger", url, "--json"])
    assert [r["sampler"] for r in json.loads(as_json.output)] == ["fast", None]
    assert json.loads(as_json.output)[0]["events"][0]["sampler"] == "fast"
    verified = runner.invoke(app, ["ledger", "verify", "--ledger", url])
    assert verified.exit_code == 0, verified.output


def test_the_command_shows_no_sampler_column_without_fast_releases(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    acct = _acct(url)
    FRAME.pipe(dp_count, epsilon=0.5, accountant=acct, dataset="d")
    acct.close()
    shown = CliRunner().invoke(app, ["budget", "history", "d", "--ledger", url], env={"COLUMNS": "200"})
    assert "sampler" not in shown.output and "floating-point" not in shown.output

"""A multiple-choice survey with k-ary randomized response (k-RR) and the estimated distribution of answers.

Each respondent's answer is reported truthfully with probability p = e^ε/(e^ε + k − 1) and as each other
answer with probability 1/(e^ε + k − 1). The counts of the reports are debiased into unbiased estimates of
the true distribution. The answers are synthetic (seeded); the ledger is an SQLite file in a temporary
directory.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.frames import krr_frequencies, randomized_response

TRANSPORT = ["car", "bus", "bicycle", "train", "on foot"]


def main() -> None:
    rng = np.random.default_rng(5)
    truth = rng.choice(TRANSPORT, size=6000, p=[0.42, 0.18, 0.15, 0.13, 0.12])
    answers = pd.DataFrame({"transport": truth})
    epsilon = 2.0
    with tempfile.TemporaryDirectory() as tmp:
        acct = PrivacyAccountant(f"sqlite:///{Path(tmp) / 'ledger.db'}", create=True)
        acct.set_budget("commute-survey", PureDP(2.0))
        reports = answers.pipe(
            randomized_response,
            "transport",
            categories=TRANSPORT,
            epsilon=epsilon,
            accountant=acct,
            dataset="commute-survey",
        )
        estimate = reports.pipe(
            krr_frequencies, "transport", normalize=True  # ε and categories recorded in reports.attrs
        )
        table = estimate.assign(
            true_share=answers["transport"].value_counts(normalize=True).reindex(TRANSPORT)
        )
        print(f"k-RR over {len(TRANSPORT)} answers at ε = {epsilon}: estimated distribution")
        print(table.round(3).to_string())
        print(acct.remaining("commute-survey"))
        acct.close()


if __name__ == "__main__":
    main()

"""A yes/no survey with randomized response, and the share of "yes" estimated from the reports.

Each answer is randomised (reported truthfully with probability e^ε/(1 + e^ε), flipped otherwise) before it
is stored, so no stored answer can be taken at face value; the share of "yes" is still estimated without
bias. The answers are synthetic (seeded); the ledger is an SQLite file in a temporary directory.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.frames import randomized_response, rr_share


def main() -> None:
    rng = np.random.default_rng(11)
    answers = pd.DataFrame({"respondent": np.arange(4000), "smoker": rng.random(4000) < 0.23})
    epsilon = 1.0
    with tempfile.TemporaryDirectory() as tmp:
        acct = PrivacyAccountant(f"sqlite:///{Path(tmp) / 'ledger.db'}", create=True)
        acct.set_budget("survey", PureDP(2.0))
        reports = answers.pipe(
            randomized_response, "smoker", epsilon=epsilon, accountant=acct, dataset="survey"
        )
        agree = float((reports["smoker"] == answers["smoker"]).mean())
        print(f"reports that equal the true answer: {agree:.1%} (expected e^ε/(1 + e^ε) = 73.1%)")
        estimate = reports.pipe(rr_share, "smoker")  # reads the ε recorded in reports.attrs
        print(f"true share of smokers: {answers['smoker'].mean():.3f} (never published)")
        print(
            f"estimated share of smokers: {estimate['value']:.3f} "
            f"(95% interval [{estimate['ci_low']:.3f}, {estimate['ci_high']:.3f}])"
        )
        print(acct.spent("survey"))
        acct.close()


if __name__ == "__main__":
    main()

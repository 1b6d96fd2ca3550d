"""A DP count of diabetic patients with Laplace noise, charged to a persistent privacy ledger.

The patients table is synthetic (seeded). The ledger is an SQLite file in a temporary directory; in a real
pipeline it is a fixed path (or a PostgreSQL URL) shared by every job that reads the dataset.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from dp_pipeline import ApproxDP, BudgetExceededError, PrivacyAccountant
from dp_pipeline.frames import dp_count


def patients(n: int = 5000, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "patient_id": np.arange(n),
            "age": rng.integers(18, 95, n),
            "diabetic": rng.random(n) < 0.11,
        }
    )


def main() -> None:
    df = patients()
    with tempfile.TemporaryDirectory() as tmp:
        acct = PrivacyAccountant(f"sqlite:///{Path(tmp) / 'ledger.db'}", create=True)
        acct.set_budget("patients", ApproxDP(1.0, 1e-6))

        # Each row is one patient: one person changes the count by at most 1, so the Laplace scale is 1/ε.
        result = df[df["diabetic"]].pipe(dp_count, epsilon=0.5, accountant=acct, dataset="patients")
        print(f"true count of diabetic patients: {int(df['diabetic'].sum())} (never published)")
        print(
            f"DP count (Laplace, ε = 0.5, scale 2): {result['value']:.1f}, "
            f"95% interval [{result['ci_low']:.1f}, {result['ci_high']:.1f}], "
            f"std error {result['std_error']:.2f}"
        )
        print(acct.spent("patients"))
        print(acct.remaining("patients"))

        df[df["diabetic"]].pipe(dp_count, epsilon=0.5, accountant=acct, dataset="patients")
        try:
            df[df["diabetic"]].pipe(dp_count, epsilon=0.5, accountant=acct, dataset="patients")
        except BudgetExceededError:
            print("third count refused: the budget of ε = 1 is spent")
        acct.close()


if __name__ == "__main__":
    main()

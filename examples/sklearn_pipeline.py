"""A scikit-learn Pipeline that adds Laplace noise to the features, then fits a model.

Every pass of data through the noise step is a release charged to the ledger: fitting the pipeline charges
once (fit_transform), scoring it charges once (transform). When the budget is gone the next fit is refused
with BudgetExceededError before any noise is drawn, and the ledger is left as it was. The data are synthetic
(seeded); the ledger is an SQLite file in a temporary directory.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from dp_pipeline import BudgetExceededError, PrivacyAccountant, PureDP
from dp_pipeline.transformers import LaplaceNoise


def data(n: int = 3000, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(20, 90, n), rng.uniform(15, 45, n)])  # age, body-mass index
    risk = 0.06 * (X[:, 0] - 55) + 0.25 * (X[:, 1] - 30)
    y = (risk + rng.logistic(size=n) > 0).astype(int)
    return X, y


def main() -> None:
    X, y = data()
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    with tempfile.TemporaryDirectory() as tmp:
        acct = PrivacyAccountant(f"sqlite:///{Path(tmp) / 'ledger.db'}", create=True)
        acct.set_budget("patients", PureDP(10.0))
        baseline = LogisticRegression().fit(X_train, y_train).score(X_test, y_test)
        model = make_pipeline(
            LaplaceNoise(epsilon=4.0, lower=[20, 15], upper=[90, 45], accountant=acct, dataset="patients"),
            LogisticRegression(),
        )
        model.fit(X_train, y_train)  # one release of the training features: ε = 4
        print(f"after fit: {acct.spent('patients')}")
        accuracy = model.score(X_test, y_test)  # one release of the test features: ε = 4
        print(f"test accuracy: {accuracy:.3f} on noisy features, {baseline:.3f} without noise (not private)")
        print(f"after score: {acct.spent('patients')}")
        try:
            model.fit(X_train, y_train)
        except BudgetExceededError as exc:
            print(f"next fit refused: {exc}")
        print(acct.remaining("patients"))
        print(f"releases: {[e.label for e in acct.history('patients')]}")
        acct.close()


if __name__ == "__main__":
    main()

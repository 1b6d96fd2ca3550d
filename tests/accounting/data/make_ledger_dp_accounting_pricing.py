"""Writes ledger_dp_accounting_pricing.db and .json with dp-pipeline as of commit 66e4c3b, the last version
whose plans were priced by dp-accounting's PLD (here dp-accounting 0.4.4 with numpy 1.26), before records
stated the pricing they were made with.

Run with that version importable:
``python make_ledger_dp_accounting_pricing.py sqlite:///PATH.db > PATH.json``.
The JSON holds what that version charged, for the test that such ledgers verify under later pricings and
that an under-charge forged into them is still found.
"""

from __future__ import annotations

import json
import sys

from dp_pipeline import ApproxDP, PrivacyAccountant
from dp_pipeline.mechanisms import BinaryRandomizedResponse, Exponential, Gaussian, Laplace


def main(url: str) -> None:
    a = PrivacyAccountant(url, create=True)
    a.set_budget("plans", ApproxDP(40.0, 1e-5))
    lap = Laplace(epsilon=0.3, sensitivity=1.0)
    gauss = Gaussian(epsilon=0.5, delta=1e-7, sensitivity=1.0)
    rr = BinaryRandomizedResponse(epsilon=0.4)
    a.spend_plan("plans", [lap, gauss, rr, Laplace(epsilon=0.7, sensitivity=2.0)], key="mixed", delta=1e-6)
    a.spend_plan("plans", [lap] * 10, key="laplace", delta=1e-6)
    a.spend_plan("plans", [rr] * 6 + [Gaussian.from_mu(0.2, sensitivity=1.0)], key="rr-gauss", delta=1e-7)
    a.spend_plan("plans", [Exponential(epsilon=0.2, sensitivity=1.0)] * 5, key="exponential", delta=1e-6)
    a.spend_plan("plans", [lap, lap, gauss, rr], key="shrunk", delta=1e-6)
    a.shrink("plans", "shrunk", [lap, gauss], reason="two tasks never started")
    a.verify()
    charged = {
        e.key: {"epsilon": e.cost.epsilon, "delta": e.cost.delta, "method": e.method}
        for e in a.history("plans")
        if e.key is not None
    }
    json.dump({"charged_as_written": charged}, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])

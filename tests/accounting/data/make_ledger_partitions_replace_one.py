"""Writes ledger_partitions_replace_one.db and .json with dp-pipeline as of commit c152077, the last version
that accepted ``partitions=L`` on a replace-one dataset and composed its partitions in parallel.

Run with that version importable:
``python make_ledger_partitions_replace_one.py sqlite:///PATH.db > PATH.json``.
The JSON holds what that version reported, for the test that such ledgers are re-read soundly.
"""

from __future__ import annotations

import json
import sys

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.mechanisms import BinaryRandomizedResponse, Laplace


def main(url: str) -> None:
    a = PrivacyAccountant(url, create=True)
    a.set_budget("visits", PureDP(1.0), partitions=1)  # replace-one, the default relation
    for day in ("2026-11-24", "2026-11-25"):
        a.spend("visits", Laplace(epsilon=1.0, sensitivity=1.0), partition=day, label=f"count {day}")
    a.set_budget("coded", PureDP(2.0), partitions=1)
    for day in ("a", "b"):
        a.spend("coded", BinaryRandomizedResponse(epsilon=1.0), partition=day)
    a.set_budget("withdrawn", PureDP(2.0), partitions=1)  # a row-level release cancelled before it ran
    held = a.reserve("withdrawn", BinaryRandomizedResponse(epsilon=1.0), partition="a")
    held.cancel(reason="the data failed the release's checks")
    a.spend("withdrawn", Laplace(epsilon=0.5, sensitivity=1.0), partition="b")
    a.set_budget("wards", PureDP(5.0), partitions=2)
    a.spend("wards", Laplace(epsilon=0.5, sensitivity=1.0))
    a.spend("wards", Laplace(epsilon=1.0, sensitivity=1.0), partition="north")
    a.spend("wards", Laplace(epsilon=1.0, sensitivity=1.0), partition="south")
    a.set_budget("flat", PureDP(1.0))
    a.spend("flat", Laplace(epsilon=0.5, sensitivity=1.0))
    a.verify()
    reported = {name: a.spent(name).epsilon for name in a.datasets()}
    json.dump({"spent_as_written": reported}, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])

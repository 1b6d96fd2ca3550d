"""Budget rules: one class per composition rule, looked up by the name the ledger stores.

=================  ===========================  ==============  ===========================================
``rule=``          class                        budget          accepts a spend while
=================  ===========================  ==============  ===========================================
``"basic"``        :class:`BasicComposition`    ApproxDP(ε, δ)  Σεᵢ ≤ ε and Σδᵢ ≤ δ
``"gdp_filter"``   :class:`GaussianDPFilter`    GaussianDP(μ)   Σμᵢ² ≤ μ²
``"pure_or_gdp"``  :class:`PureOrGaussianDP`    ApproxDP(ε, δ)  all pure and Σεᵢ ≤ ε, or Σμᵢ² ≤ μ_B², δ > 0
``"zcdp"``         :class:`ZeroConcentratedDP`  ApproxDP(ε, δ)  all pure and Σεᵢ ≤ ε, or Σρᵢ ≤ ρ_B, δ > 0
=================  ===========================  ==============  ===========================================

``"auto"`` (the default) is ``"basic"`` for an (ε, δ) budget and ``"gdp_filter"`` for a μ-GDP budget.

Why ``"auto"`` stays ``"basic"`` for (ε, δ > 0) budgets now that ``"zcdp"`` exists: basic composition takes
every release, also (ε, δ > 0) guarantees that are not Gaussian noise (which have no zCDP, and ``"zcdp"``
refuses), and it charges a Gaussian release at its own (ε, δ), so a few releases, or one release calibrated
to the whole budget, fit basic composition and not zCDP (its conversion of ρ to (ε, δ) is not tight for one
Gaussian). A default that started refusing releases the same code spent before would break pipelines. Both
rules are valid for adaptive spends. Choose ``rule="zcdp"`` for many pure and Gaussian releases chosen one
after another: 100 Laplace releases of ε = 0.05 fit ε = 3, δ = 10⁻⁶ under it (148 do), 60 under basic
composition. A budget keeps the rule it was set with; ledgers written earlier keep theirs.

The ledger stores a budget's rule as its ``method``, a name that with the budget's type picks one class:
``"basic"``, or ``"gdp"`` (the μ-GDP filter on a GaussianDP budget, pure-or-GDP on an ApproxDP budget).
Those names are what ledgers written before rules were classes hold, so they open unchanged; ``"gdp"`` is
a stored name only (``set_budget`` takes ``"gdp_filter"`` or ``"pure_or_gdp"``). A rule is
found through this fixed table, never through a name or an import path read from the database.

A new rule is one module (a :class:`~dp_pipeline.accounting.rules.BudgetRule` subclass) and one entry
in :data:`RULES` (or a call to :func:`register_rule`), in the manner of Opacus's accountant registry.
"""

from __future__ import annotations

from dp_pipeline.accounting.rules._base import BudgetRule, Charge, PlanCharge, Totals
from dp_pipeline.accounting.rules._basic import BasicComposition
from dp_pipeline.accounting.rules._gdp_filter import GaussianDPFilter
from dp_pipeline.accounting.rules._pure_or_gdp import PureOrGaussianDP
from dp_pipeline.accounting.rules._zcdp import ZeroConcentratedDP
from dp_pipeline.exceptions import InvalidParameterError, LedgerError
from dp_pipeline.guarantees import Guarantee

__all__ = [
    "DEFAULT_RULES",
    "RULES",
    "BasicComposition",
    "BudgetRule",
    "Charge",
    "GaussianDPFilter",
    "PlanCharge",
    "PureOrGaussianDP",
    "Totals",
    "ZeroConcentratedDP",
    "register_rule",
    "rule_names",
    "stored_rule",
    "user_rule",
]

RULES: list[type[BudgetRule]] = [BasicComposition, GaussianDPFilter, PureOrGaussianDP, ZeroConcentratedDP]
"""The registered rules. A stored (name, budget type) pair and a user-facing name per budget type each pick
at most one of them (see :func:`register_rule`)."""

DEFAULT_RULES: dict[str, type[BudgetRule]] = {"approx": BasicComposition, "gdp": GaussianDPFilter}
"""``rule="auto"``: the rule of a new budget, by its guarantee's ``type_name``."""


def register_rule(rule: type[BudgetRule]) -> type[BudgetRule]:
    """Add a rule to :data:`RULES` (usable as a class decorator).

    Raises InvalidParameterError if a registered rule already takes the same budget type under the same
    stored name or one of the same user-facing names: the ledger and ``set_budget`` must pick one class.
    """
    if not (isinstance(rule, type) and issubclass(rule, BudgetRule)):
        raise InvalidParameterError(f"a rule must be a BudgetRule subclass, got {rule!r}", "rule")
    for other in RULES:
        if other is rule or other.currency is not rule.currency:
            continue
        if other.name == rule.name or set(other.names) & set(rule.names) or "auto" in rule.names:
            raise InvalidParameterError(
                f"{rule.__name__} takes {rule.currency.__name__} budgets under a name that "
                f"{other.__name__} already has",
                "rule",
            )
    if rule not in RULES:
        RULES.append(rule)
    return rule


def stored_rule(name: str, budget: Guarantee, where: str) -> type[BudgetRule]:
    """The rule of a budget read from the ledger (its stored ``method`` and guarantee); a LedgerError if no
    rule is registered for them."""
    for rule in RULES:
        if rule.name == name and isinstance(budget, rule.currency):
            return rule
    raise LedgerError(f"{where}: unknown composition method {name!r} for a {type(budget).__name__} budget")


def rule_names(budget: Guarantee) -> list[str]:
    """The names ``set_budget(..., rule=...)`` accepts for ``budget``, ``"auto"`` first."""
    return ["auto", *(name for rule in RULES if isinstance(budget, rule.currency) for name in rule.names)]


def user_rule(name: object, budget: Guarantee, parameter: str = "rule") -> type[BudgetRule]:
    """The rule that ``set_budget(..., rule=name)`` asks for on ``budget``; InvalidParameterError if none."""
    if name == "auto":
        return DEFAULT_RULES[budget.type_name]
    fitting = [rule for rule in RULES if name in rule.names]
    for rule in fitting:
        if isinstance(budget, rule.currency):
            return rule
    known = sorted({n for rule in RULES for n in rule.names})
    if not fitting:
        shown = ", ".join(repr(n) for n in ["auto", *known])
        raise InvalidParameterError(f"{parameter!r} must be one of {shown}, got {name!r}", parameter)
    takes = " or ".join(sorted({rule.currency.__name__ for rule in fitting}))
    fits = ", ".join(repr(n) for n in rule_names(budget))
    raise InvalidParameterError(
        f"rule {name!r} is for {takes} budgets, not {type(budget).__name__}; for this budget use one of "
        f"{fits}",
        parameter,
    )

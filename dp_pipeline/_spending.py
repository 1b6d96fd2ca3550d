"""The public edge of paying: what a user passes as ``accountant=`` (and ``dataset=``), made a
:class:`~dp_pipeline.accounting.Spender` once.

The frame functions and the scikit-learn transformers take ``accountant=`` and ``dataset=`` as users
write them and call :func:`as_spender` once; everything after that is typed against the Spender protocol
(:mod:`dp_pipeline.accounting._spender`), which states the one order every release follows. Accepted:

===============================================  =============================================
``accountant=``                                  ``dataset=``
===============================================  =============================================
a :class:`~dp_pipeline.PrivacyAccountant`        required: the dataset charged (its handle)
``acct.dataset("visits")`` (a DatasetHandle)     omitted, or the handle's own dataset
a :class:`~dp_pipeline.accounting.Reservation`   omitted, or the reservation's own dataset
``UNACCOUNTED`` or the string ``"unaccounted"``  ignored: nothing is charged
===============================================  =============================================
"""

from __future__ import annotations

from typing import Any

from dp_pipeline.accounting import PrivacyAccountant, Reservation
from dp_pipeline.accounting._spender import UNACCOUNTED, DatasetHandle, Spender, Unaccounted
from dp_pipeline.exceptions import InvalidParameterError

__all__ = ["as_spender"]

_OPT_OUT = "unaccounted"
"""The string the public edge accepts for :data:`~dp_pipeline.accounting.UNACCOUNTED`."""


def as_spender(accountant: Any, dataset: Any = None) -> Spender:
    """The spender a release with ``accountant=`` and ``dataset=`` is charged to (see the module table).

    Parameters
    ----------
    accountant : PrivacyAccountant, DatasetHandle, Reservation, UNACCOUNTED or "unaccounted"
        Who pays.
    dataset : str, optional
        The dataset charged: required with a PrivacyAccountant; with a handle or a reservation, omitted or
        the one they are bound to.

    Raises
    ------
    InvalidParameterError
        Naming ``accountant`` when it is None or not one of those; naming ``dataset`` when it is missing
        for an accountant, or names another dataset than the handle's or the reservation's. Nothing is
        read or charged.
    """
    if isinstance(accountant, Unaccounted) or (isinstance(accountant, str) and accountant == _OPT_OUT):
        return UNACCOUNTED
    if isinstance(accountant, PrivacyAccountant):
        if not isinstance(dataset, str) or not dataset:
            raise InvalidParameterError(
                "'dataset' must name the dataset whose budget the releases are charged to, got "
                f"{type(dataset).__name__}; or pass accountant=acct.dataset('<name>')",
                "dataset",
            )
        return accountant.dataset(dataset)
    if isinstance(accountant, (DatasetHandle, Reservation)):
        bound = accountant.name if isinstance(accountant, DatasetHandle) else accountant.dataset
        if dataset is not None and dataset != bound:
            raise InvalidParameterError(
                f"'accountant' charges dataset {bound!r}, and 'dataset' names another one: omit 'dataset' "
                "or name the same one",
                "dataset",
            )
        return accountant
    raise _not_a_spender(accountant)


def _not_a_spender(accountant: Any) -> InvalidParameterError:
    """The refusal of an ``accountant=`` that pays nothing (None, or another type)."""
    if accountant is None:
        return InvalidParameterError(
            "no accountant: every release is charged to a privacy ledger. Pass "
            "accountant=PrivacyAccountant('sqlite:///ledger.db').dataset('<name>') (or the accountant and "
            f"dataset='<name>'), or accountant={_OPT_OUT!r} to release without charging any ledger (nothing "
            "then limits how often the data is released)",
            "accountant",
        )
    return InvalidParameterError(
        "'accountant' must be a PrivacyAccountant, a dataset handle (acct.dataset('<name>')), a "
        f"Reservation to pay from or {_OPT_OUT!r}, got {type(accountant).__name__}",
        "accountant",
    )

"""The privacy analysis behind the accountant: pure composition maths, no I/O and no state.

:mod:`~dp_pipeline.accounting._analysis.composition` holds basic and μ-GDP composition, group privacy and the
conversions between guarantees; :mod:`~dp_pipeline.accounting._analysis.pld` the tight composition of a plan
fixed in advance (privacy-loss distributions, bounded range) and its proven lower bound. Imports the
guarantees and events, never the mechanisms.
"""

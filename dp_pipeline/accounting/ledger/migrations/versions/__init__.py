"""Ledger schema revisions, oldest first."""

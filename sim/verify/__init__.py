"""Verification tools: functional and code coverage, lint, formal proofs, waves."""

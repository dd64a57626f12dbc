"""Estimators: validate, assemble (loss, oracle, constraint, solver), store; no math."""

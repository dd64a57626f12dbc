"""Empirical privacy audit of every skdpsco estimator and algorithm (design.md §4.7)."""

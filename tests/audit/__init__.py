"""Empirical privacy audit of every skdpsco estimator and algorithm (see README.md)."""

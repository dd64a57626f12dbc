"""Warnings and errors raised by skdpsco."""

__all__ = [
    "CertificationError",
    "PrivacyBudgetError",
    "PrivacyLeakWarning",
]


class PrivacyLeakWarning(UserWarning):
    """A configuration weakens or voids the stated privacy guarantee.

    Raised, for example, when ``delta >= 1 / n_samples`` (a mechanism may then publish
    a whole record with probability ``delta``), or when the label set of a classifier
    is read from the data rather than given as the public ``classes`` parameter.
    """


class PrivacyBudgetError(ValueError):
    """The privacy budget (or the sample size) is too small for the chosen method.

    Also raised if a fit would spend more than it was given, which is a bug: nothing
    is released in that case.
    """


class CertificationError(RuntimeError):
    """A solver could not certify the accuracy its privacy proof needs.

    Algorithms whose sensitivity argument assumes an (approximate) minimiser release
    nothing when the certificate is not reached (design rule 4.6).
    """

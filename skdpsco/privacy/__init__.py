"""The shared privacy layer: validation, accounting, mechanisms and the ledger.

Neighbouring relation for every guarantee in skdpsco: datasets of the same, public
size ``n`` that differ in one record (replace-one).
"""

from ._accounting import (
    DEFAULT_RDP_ORDERS,
    account_records,
    approx_dp_to_gdp,
    approx_dp_to_zcdp,
    calibrate_analytic_gaussian,
    compose_rdp,
    compose_zcdp,
    gaussian_delta,
    gaussian_rho_budget,
    gdp_to_approx_dp,
    noise_multiplier_for_rdp,
    rdp_gaussian,
    rdp_poisson_subsampled_gaussian,
    rdp_to_approx_dp,
    zcdp_to_approx_dp,
)
from ._ledger import PrivacySpent
from ._mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    gaussian_noise,
    laplace_noise,
    sigma_for_zcdp,
)
from ._params import PRIVACY_PARAMETER_CONSTRAINTS, PrivacyBudget, check_privacy_params
from ._records import MechanismRecord
from ._workflow import total_privacy_spent

__all__ = [
    "DEFAULT_RDP_ORDERS",
    "PRIVACY_PARAMETER_CONSTRAINTS",
    "GaussianMechanism",
    "LaplaceMechanism",
    "MechanismRecord",
    "PrivacyBudget",
    "PrivacySpent",
    "account_records",
    "approx_dp_to_gdp",
    "approx_dp_to_zcdp",
    "calibrate_analytic_gaussian",
    "check_privacy_params",
    "compose_rdp",
    "compose_zcdp",
    "gaussian_delta",
    "gaussian_noise",
    "gaussian_rho_budget",
    "gdp_to_approx_dp",
    "laplace_noise",
    "noise_multiplier_for_rdp",
    "rdp_gaussian",
    "rdp_poisson_subsampled_gaussian",
    "rdp_to_approx_dp",
    "sigma_for_zcdp",
    "total_privacy_spent",
    "zcdp_to_approx_dp",
]

"""Optional dependencies, imported lazily with an install hint.

The in-memory path imports none of them: ``import skdpsco`` and a numpy fit never
import dask. Code that handles dask input calls :func:`import_dask` at the point of
use.
"""

import importlib

__all__ = ["import_dask", "is_dask_collection"]

#: The hint every missing optional dependency of the dask extra points to.
DASK_HINT = "pip install 'skdpsco[dask]'"


def import_dask(submodule="array"):
    """Import ``dask.<submodule>`` (``"array"``, ``"dataframe"``, ``"distributed"``
    as ``distributed``), or raise an ImportError that says how to install it.

    Parameters
    ----------
    submodule : {"array", "dataframe", "distributed"}, default="array"

    Returns
    -------
    module
    """
    name = "distributed" if submodule == "distributed" else f"dask.{submodule}"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"Fitting on dask collections needs {name}, an optional dependency: "
            f"{DASK_HINT}"
        ) from exc


def is_dask_collection(obj):
    """Whether ``obj`` is a dask collection, without importing dask.

    A dask collection defines ``__dask_graph__`` (dask's collection protocol);
    numpy, scipy.sparse and pandas objects do not.
    """
    graph = getattr(type(obj), "__dask_graph__", None)
    return callable(graph)

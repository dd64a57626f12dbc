"""The package's floor plan: imports go down the layers, never up, never in a circle.

From an estimator's ``fit`` to the noise draw the route goes one way: estimator ->
solver -> mean oracle -> mechanism -> accountant. Each module may import from its
own layer's package and from lower layers only; two packages on the same floor
(estimators, preprocessing, model selection) do not import each other.
"""

import ast
import pathlib

import pytest

import skdpsco

PACKAGE = pathlib.Path(skdpsco.__file__).parent

#: Lowest first. A module's layer is that of the longest prefix listed here.
LAYERS = {
    "skdpsco.exceptions": 0,
    "skdpsco.utils": 0,
    "skdpsco.privacy": 1,
    # Below the design, which may sum through it; numpy only.
    "skdpsco._exact_sum": 1,
    "skdpsco._losses": 2,
    "skdpsco._constraints": 2,
    "skdpsco._design": 2,
    "skdpsco._sparse_rows": 2,
    # Below the column scaling, which hands dask input to it.
    "skdpsco._dask_scaling": 2,
    "skdpsco._mean_estimation": 3,
    "skdpsco._column_scaling": 3,
    "skdpsco._dask_design": 3,
    "skdpsco._solvers": 4,
    "skdpsco._estimators": 5,
    "skdpsco.preprocessing": 5,
    "skdpsco.model_selection": 5,
    "skdpsco.datasets": 5,
    "skdpsco": 6,
}


def _modules():
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _imports(name, path, mods):
    """Every skdpsco module ``name`` imports (function-level imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names} & mods.keys()
            out |= subs or ({target} & mods.keys())
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & mods.keys()
    return out


def _layer(name):
    key = max((k for k in LAYERS if name == k or name.startswith(k + ".")), key=len)
    return key, LAYERS[key]


MODULES = _modules()
GRAPH = {name: _imports(name, path, MODULES) for name, path in MODULES.items()}


def test_every_module_has_a_layer():
    assert all(_layer(name) for name in MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_down(name):
    home, rank = _layer(name)
    for target in GRAPH[name]:
        there, target_rank = _layer(target)
        assert target_rank < rank or there == home, (
            f"{name} (layer {rank}) imports {target} (layer {target_rank}): "
            "imports must go to a lower layer or stay in the same package"
        )


def test_no_import_cycle():
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == "open":
                pytest.fail("import cycle: " + " -> ".join([*path, node, nxt]))
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [])


def test_the_checker_sees_an_upward_import():
    # The privacy layer importing an estimator would be reported.
    _, low = _layer("skdpsco.privacy._mechanisms")
    _, high = _layer("skdpsco._estimators._base")
    assert low < high
    assert "skdpsco.privacy._accounting" in GRAPH["skdpsco.privacy._ledger"]

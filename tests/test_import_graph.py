"""No module of ours imports itself through others: a cycle makes import order matter and ties the modules
into one unit. lint-imports (pyproject.toml) checks the import direction rules; import-linter's cycle
contract compares whole subpackages, so the module-level check is this test, on grimp's graph. It counts
imports inside functions too (they run, later); imports only for type checkers do not run, so they do not
count."""

import grimp
import pytest

ROOTS = ("sim", "robot_rl", "robot_rl_ros", "robot_conventions")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*ROOTS, cache_dir=None, exclude_type_checking_imports=True)


def module_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """Each cycle once, as the modules along it (the first repeated at the end), shortest closing chain."""
    cycles: dict[frozenset[str], tuple[str, ...]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.setdefault(frozenset(back), (importer, *back))
    return sorted(cycles.values())


def test_no_module_imports_itself_through_others(graph):
    found = [" -> ".join(cycle) for cycle in module_cycles(graph)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_check_finds_a_cycle():
    g = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        g.add_import(importer=a, imported=b)
    assert module_cycles(g) == [("p.a", "p.b", "p.c", "p.a")]

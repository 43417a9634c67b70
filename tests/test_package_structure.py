"""The package's import graph: no cycles, no private names across modules, imports at the top.

Walks every module of formal_rope with `ast` (nothing is imported), counting imports at every depth
(a function-local import is as real a dependency as a top-level one) except those under
`if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "formal_rope"
# A command module is imported only when its command runs (cli.COMMANDS) and imports the library
# at its top; its function-local imports keep torch or numpy off that command's --help, and say so,
# as library modules must at each one (commands/sweep.py is still exempt, hence the prefix).
START_UP_MODULES = ("formal_rope.cli", "formal_rope.commands")


@dataclass(frozen=True)
class ImportSite:
    module: str  # the importing module
    targets: tuple[str, ...]  # formal_rope modules it loads
    names: tuple[str, ...]  # names taken from the target (`from x import a, b`)
    line: int
    local: bool  # inside a function
    commented: bool  # a comment on the line, or on one of the two lines above (the reason)


def module_files() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(module: str, is_package: bool, node: ast.ImportFrom | ast.Import, modules) -> tuple[str, ...]:
    if isinstance(node, ast.Import):
        return tuple(alias.name for alias in node.names if alias.name.startswith("formal_rope"))
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("formal_rope"):
        return ()
    # `from package import submodule` loads the submodule; `from module import name` the module.
    submodules = tuple(f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in modules)
    return (target, *submodules)


def import_sites() -> list[ImportSite]:
    modules = module_files()
    sites = []
    for module, path in modules.items():
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)

        def visit(node: ast.AST, local: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    context = lines[max(0, child.lineno - 3): child.end_lineno]
                    sites.append(ImportSite(
                        module=module,
                        targets=_resolve(module, path.name == "__init__.py", child, modules),
                        names=tuple(alias.name for alias in child.names),
                        line=child.lineno,
                        local=local,
                        commented=any("#" in text for text in context),
                    ))
                visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(tree, False)
    return sites


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    edges: dict[str, set[str]] = {module: set() for module in modules}
    for site in import_sites():
        edges[site.module].update(target for target in site.targets if target in modules and target != site.module)
    return edges


def test_the_walk_sees_the_package():
    edges = import_graph()
    assert len(edges) > 100
    assert "formal_rope.training.setup" in edges["formal_rope.training.train"]
    assert "formal_rope.model.forward" in edges["formal_rope.model.certificate"]


def test_strongly_connected_finds_a_planted_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(edges) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    # Function-local imports count: hiding a cycle inside a function does not remove it.
    assert strongly_connected(import_graph()) == []


def test_no_module_imports_another_modules_private_name():
    offenders = [
        f"{site.module}:{site.line} takes {name} from {site.targets[0]}"
        for site in import_sites()
        if site.targets
        for name in site.names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert offenders == []


def test_library_imports_inside_functions_say_why():
    # Allowed only to keep torch, numpy, pandas, rich, Ray or matplotlib off a torch-free path,
    # with a comment saying so; the command modules are the CLI start-up path itself.
    offenders = [
        f"{site.module}:{site.line}"
        for site in import_sites()
        if site.local and site.targets and not site.commented and not site.module.startswith(START_UP_MODULES)
    ]
    assert offenders == []


def package_of(module: str) -> str:
    """The sub-package a module belongs to (formal_rope.training.setup -> formal_rope.training);
    a module directly under formal_rope is its own node (formal_rope.progress)."""
    return ".".join(module.split(".")[:2])


def package_graph() -> dict[str, set[str]]:
    """formal_rope's sub-packages (and top-level modules), each with the others it imports from."""
    edges: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        if module == "formal_rope":
            continue  # the root package's own __init__ belongs to no stage
        source = package_of(module)
        edges.setdefault(source, set()).update(
            package_of(target) for target in targets if target != "formal_rope" and package_of(target) != source)
    return edges


def test_package_graph_sees_a_planted_upward_import():
    edges = package_graph()
    assert "formal_rope.training" in edges["formal_rope.runs"]
    assert "formal_rope.evaluation" in edges["formal_rope.runs"]
    planted = {**edges, "formal_rope.training": edges["formal_rope.training"] | {"formal_rope.runs"}}
    assert ["formal_rope.runs", "formal_rope.training"] in [
        [name for name in component if name in ("formal_rope.runs", "formal_rope.training")]
        for component in strongly_connected(planted)
    ]


def test_no_package_imports_a_package_above_it():
    # A package-level cycle (training -> evaluation -> training) means neither package can be read,
    # tested or changed without the other; function-local imports count here too.
    assert strongly_connected(package_graph()) == []


# The floors of the package, bottom up: a package imports only from its own floor or below (within a
# floor, the no-cycle test above orders them). Storage sits under the trainer (the loop saves its
# state there, a result holds its curve) and knows no model; the run config sits beside it, under
# everything that reads configs; scheduling (which runs share a pack, whether a run fits) reads
# configs alone, so the resolve step under the trainer can check a run's workload; the IR and the
# compiler sit beside the trainer, never above it; evaluation and the theory read trained models and configs; a
# run uses them all; sweeps schedule runs; the atlas runs sweeps; the CLI calls everything.
FLOORS = (
    ("_lazy", "auto_periods", "errors", "limits", "numbers", "processes", "progress"),
    ("files", "kernels", "precision", "lang", "certify", "automata", "classes", "sampling"),
    ("storage", "run_config"),
    ("scheduling",),
    ("model", "compiler"),
    ("training",),
    ("evaluation", "theory", "diagnostics", "export"),
    ("runs",),
    ("sweeps",),
    ("atlas",),
    ("commands", "cli"),
)


def floor_of(package: str) -> int:
    name = package.removeprefix("formal_rope.")
    return next(number for number, floor in enumerate(FLOORS) if name in floor)


def test_every_package_has_a_floor():
    listed = [name for floor in FLOORS for name in floor]
    assert len(listed) == len(set(listed))
    assert sorted(package.removeprefix("formal_rope.") for package in package_graph()) == sorted(listed)


def test_no_package_imports_from_a_floor_above_it():
    upward = [
        f"{source} (floor {floor_of(source)}) imports {target} (floor {floor_of(target)})"
        for source, targets in package_graph().items()
        for target in sorted(targets)
        if floor_of(target) > floor_of(source)
    ]
    assert upward == []


def test_the_floor_check_sees_a_planted_upward_import():
    edges = package_graph()
    planted = {**edges, "formal_rope.model": edges["formal_rope.model"] | {"formal_rope.training"}}
    assert any(floor_of(target) > floor_of(source) for source, targets in planted.items() for target in targets)


def test_the_model_and_storage_never_import_the_trainer():
    # model/ is the compiled IR and its files; storage/ keeps runs on disk: neither may depend on
    # the trainer (any model file is loaded one floor up, by evaluation.loading).
    offenders = [
        f"{site.module}:{site.line} imports {target}"
        for site in import_sites()
        if site.module.startswith(("formal_rope.model", "formal_rope.storage"))
        for target in site.targets
        if target.startswith(("formal_rope.training", "formal_rope.runs", "formal_rope.evaluation"))
    ]
    assert offenders == []

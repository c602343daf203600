"""The import graph of src/ttrl_bench (issue 36): no module imports itself back through others, packages only
look down (PACKAGE_ORDER), the plan's modules only look down too (PLAN_LAYERS, docs/DESIGN.md "The plan's
layers"), and no file is over MAX_LINES. Imports are read with `ast`, at top level and inside functions
alike: a function-level import is still a dependency, only a later one. At the end: tests/ mirrors src/ttrl_bench/
(issue 56)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "ttrl_bench"
MAX_LINES = 450

# Bottom first: a package may import those before it, never those after it. Derived from the code:
# runs (process helpers) and generation import no other package; rewards must not import evaluation
# (answer-text helpers they share belong below rewards: a text-level package goes between generation and
# rewards); datasets import rewards (grounding answers' validity); models import datasets (the demo's digit
# names), generation (chat prompts) and runs (process state); evaluation sits on models; adaptation on
# evaluation; results read adaptation's presets; the plan sits on all of these; the CLI on top.
PACKAGE_ORDER = ["runs", "generation", "rewards", "datasets", "models", "evaluation", "adaptation", "results",
                 "plan", "cli"]
# The plan's modules, bottom first; modules of one layer do not import each other except as listed in
# PLAN_WITHIN (the lower one first).
PLAN_LAYERS = [
    ("config", ["protocols", "config", "names", "cards"]),
    ("grid", ["grid", "samples"]),
    ("memory", ["memory"]),
    ("cost", ["cost", "evaluation_cost"]),
    ("requests", ["resources"]),
    ("checks", ["preflight", "results_tree", "checks"]),
    ("top", ["cells", "__init__"]),
]
PLAN_WITHIN = {("config", "protocols"), ("samples", "grid"), ("checks", "preflight")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports(module: str) -> list[tuple[str, int]]:
    """(imported module of ttrl_bench, line) for every import in `module`: `from .x import y` is the module
    x.y where y is one, else x; a package stands for its __init__."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "ttrl_bench":
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.append((child if child in MODULES else target, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "ttrl_bench"]
    # a name of a module not (or no longer) there: the closest existing parent
    resolved = []
    for target, line in found:
        while target not in MODULES and "." in target:
            target = target.rpartition(".")[0]
        if target != module:
            resolved.append((target, line))
    return resolved


GRAPH = {m: imports(m) for m in MODULES}


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(SRC.parent)}:{line}"


def edge(module: str, target: str, line: int) -> str:
    return f"{where(module, line)}: {module} -> {target}"


def package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def cycles() -> list[list[str]]:
    """Each cycle of the module graph once (depth-first search; a cycle is reported where the search
    first closes it), as the list of its modules, the first repeated at the end."""
    found, state, stack = [], {}, []  # state: 1 on the stack, 2 done

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target, _ in GRAPH[module]:
            if state.get(target) == 1:
                found.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    return found


def cycle_text(cycle: list[str]) -> str:
    lines = []
    for module, target in zip(cycle, cycle[1:]):
        line = next(line for t, line in GRAPH[module] if t == target)
        lines.append("    " + edge(module, target, line))
    return "\n".join(lines)


def test_the_import_graph_has_no_cycle():
    found = cycles()
    assert not found, f"{len(found)} import cycle(s), each edge as file:line: from -> to\n" + "\n".join(
        f"  cycle {i + 1}:\n{cycle_text(c)}" for i, c in enumerate(found))


def test_every_package_is_in_the_declared_order():
    packages = {package(m) for m in MODULES} - {None}
    unknown = sorted(packages - set(PACKAGE_ORDER))
    assert not unknown, f"package(s) {unknown} of src/ttrl_bench are not in PACKAGE_ORDER (tests/test_layers.py): place them"


def test_lower_packages_never_import_higher_ones():
    rank = {name: i for i, name in enumerate(PACKAGE_ORDER)}
    upward = [edge(m, t, line) + f"  ({package(m)} imports {package(t)}, above it)"
              for m in sorted(GRAPH) for t, line in GRAPH[m]
              if package(m) in rank and package(t) in rank and rank[package(t)] > rank[package(m)]]
    assert not upward, (f"{len(upward)} import(s) against PACKAGE_ORDER ({' < '.join(PACKAGE_ORDER)}), "
                        "file:line: from -> to\n  " + "\n  ".join(upward))


def test_the_plans_modules_only_look_down():
    layer = {f"ttrl_bench.plan{'' if name == '__init__' else '.' + name}": i
             for i, (_, names) in enumerate(PLAN_LAYERS) for name in names}
    plan_modules = {m for m in MODULES if package(m) == "plan"}
    missing = sorted(plan_modules - set(layer))
    assert not missing, f"plan module(s) {missing} are in no layer of PLAN_LAYERS (tests/test_layers.py)"
    short = lambda m: m.rpartition(".")[2] if m != "ttrl_bench.plan" else "__init__"  # noqa: E731
    bad = [edge(m, t, line) + f"  (layer {PLAN_LAYERS[layer[m]][0]} imports layer {PLAN_LAYERS[layer[t]][0]})"
           for m in sorted(plan_modules) for t, line in GRAPH[m]
           if t in layer and (layer[t] > layer[m] or (layer[t] == layer[m] and (short(m), short(t)) not in PLAN_WITHIN
                                                      and m != "ttrl_bench.plan"))]
    assert not bad, "plan imports that do not look down, file:line: from -> to\n  " + "\n  ".join(bad)


def test_no_file_is_over_the_line_limit():
    long = {path: len(path.read_text().splitlines()) for path in sorted(SRC.rglob("*.py"))}
    over = [f"{path.relative_to(SRC.parent)}: {n} lines" for path, n in long.items() if n > MAX_LINES]
    assert not over, f"file(s) over {MAX_LINES} lines, to split:\n  " + "\n  ".join(over)


# --- tests/ mirrors src/ttrl_bench/ (issue 56) ------------------------------------------------------------------
# tests/<package>/test_<module>.py pins src/ttrl_bench/<package>/<module>.py; a test module sits in the folder of
# the package it imports most, or in one of these folders, named for what its tests exercise across packages.
# Every folder is a package (__init__.py): same-named modules in two folders (plan/test_config.py,
# adaptation/test_config.py) import under pytest's default mode as tests.plan.test_config and so on.
TESTS = Path(__file__).resolve().parent
CROSS_CUTTING = {
    "workflow": "Snakemake end to end: the README's run, resume, SLURM, the extending guide",
    "gpu_path": "what runs on a GPU, rehearsed on the CPU: real-width models, launches, vLLM",
    "fidelity": "comparisons with the authors' code and logs",
    "project": "the checkout's other parts: envs/, benchmarks/",
}
NOT_TESTS = {"support", "data"}  # shared builders; fixture files
TOP_LEVEL = {"test_layers.py"}  # these layout checks themselves
NAMED_FOR_HOW_FOUND = ("*survivors*", "*_units.py", "*_helpers.py")


def imported(path: Path) -> tuple[dict[str, int], set[str]]:
    """Names each ttrl_bench package gives the module (`from ttrl_bench.plan.cost import a, b` counts 2 for plan;
    a name of tests/support/<package>.py counts for that package), and every ttrl_bench module it imports
    (`from ttrl_bench.plan import cost` imports plan and plan.cost)."""
    counts, modules = {}, set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "ttrl_bench":
            for alias in node.names:
                full = f"{node.module}.{alias.name}".split(".")
                counts[full[1]] = counts.get(full[1], 0) + 1
                modules |= {".".join(full[:i]) for i in range(2, len(full) + 1)}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.support."):
            package = node.module.split(".")[2]  # tests/support/<package>.py: that package's builders
            counts[package] = counts.get(package, 0) + len(node.names)
            modules.add(f"ttrl_bench.{package}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                full = alias.name.split(".")
                if full[0] == "ttrl_bench" and len(full) > 1:
                    counts[full[1]] = counts.get(full[1], 0) + 1
                    modules |= {".".join(full[:i]) for i in range(2, len(full) + 1)}
    return counts, modules


def misplaced(tests: Path, src_root: Path) -> list[str]:
    """Each test module not where the layout puts it, with the reason and where it belongs."""
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        folder = rel.parts[:-1]
        if not folder:
            if rel.name not in TOP_LEVEL:
                found.append(f"{rel}: at the top of tests/; put it beside the package it pins or in a folder of "
                             f"CROSS_CUTTING")
            continue
        if folder[0] in CROSS_CUTTING or folder[0] in NOT_TESTS:
            continue
        counts, modules = imported(path)
        if not (src_root / Path(*folder)).is_dir():
            found.append(f"{rel}: src/ttrl_bench has no package {'/'.join(folder)}")
            continue
        unit = ".".join(("ttrl_bench",) + folder + (path.stem.removeprefix("test_"),))
        most = max(counts.values(), default=0)
        top = sorted(p for p, n in counts.items() if n == most)
        if unit not in modules and folder[0] not in top:
            found.append(f"{rel}: imports most from ttrl_bench.{' / '.join(top) or '(nothing)'} {counts}; move it to "
                         f"tests/{top[0] if top else '<cross-cutting folder>'}/ or name it for a module of "
                         f"{'/'.join(folder)} it imports")
    return found


def named_for_how_found(tests: Path) -> list[str]:
    return sorted(str(p.relative_to(tests)) for pattern in NAMED_FOR_HOW_FOUND for p in tests.rglob(pattern))


def test_every_test_module_sits_beside_the_package_it_pins():
    found = misplaced(TESTS, ROOT)
    assert not found, "test module(s) out of place (tests/test_layers.py, CROSS_CUTTING):\n  " + "\n  ".join(found)


def test_every_test_folder_is_a_package():
    folders = sorted({p.parent for p in TESTS.rglob("*.py")} - {TESTS})
    missing = [str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").exists()]
    assert not missing, f"test folder(s) without __init__.py (two test_config.py would collide): {missing}"


def test_no_test_file_is_named_for_the_method_that_found_its_tests():
    assert named_for_how_found(TESTS) == []


def test_the_layout_check_finds_a_misplaced_module_and_passes_a_placed_one(tmp_path):
    """A synthetic tests/ tree over the real src/: plan/test_cost.py importing plan.cost is in place (its name
    is a plan module it imports), plan/test_budget.py importing two names of generation.budget and one of
    plan is not (named for no plan module, and generation gives it most: 2 against 1); at the top, a test
    module is out of place; a cross-cutting folder takes any; a folder src has not is named; so are files
    named for how their tests were found."""
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "test_cost.py").write_text("from ttrl_bench.plan.cost import decide\n")
    (tmp_path / "plan" / "test_budget.py").write_text(
        "from ttrl_bench.generation.budget import a, b\nfrom ttrl_bench.plan import cost\n")
    (tmp_path / "test_top.py").write_text("")
    (tmp_path / "fidelity").mkdir()
    (tmp_path / "fidelity" / "test_anything.py").write_text("from ttrl_bench.results import store\n")
    (tmp_path / "nowhere").mkdir()
    (tmp_path / "nowhere" / "test_x.py").write_text("from ttrl_bench.plan import cost\n")
    for name in ("test_cost_survivors.py", "test_plan_units.py"):  # in place, but named for how they were found
        (tmp_path / "plan" / name).write_text("from ttrl_bench.plan.cost import decide\n")
    found = misplaced(tmp_path, ROOT)
    assert [line.split(":")[0] for line in found] == ["nowhere/test_x.py", "plan/test_budget.py", "test_top.py"]
    assert "ttrl_bench.generation {'generation': 2, 'plan': 1}; move it to tests/generation/" in found[1]
    assert named_for_how_found(tmp_path) == ["plan/test_cost_survivors.py", "plan/test_plan_units.py"]

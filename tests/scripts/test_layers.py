"""The orchestration package in layers: every module of scripts/cclbench_lib imports only from its
own or a lower layer, at the top of the file (matplotlib alone may be imported inside a function), and no
modules import each other in a circle. A module's layer is its subpackage, so a new module needs no edit here."""
import ast
import os
import unittest

from helpers import SOURCE_DIR

LIB = os.path.join(SOURCE_DIR, "scripts", "cclbench_lib")
PACKAGE = "cclbench_lib"
LAYERS = ("base", "model", "rules", "render", "plan", "execute", "cli")  # lowest first
LAZY_ALLOWED = ("matplotlib",)


def module_name(path):
    relative = os.path.relpath(path, os.path.dirname(LIB))[:-len(".py")].split(os.sep)
    if relative[-1] == "__init__":
        relative = relative[:-1]
    return ".".join(relative)


def modules(root=LIB):
    """{dotted name: path} of every .py file of the package."""
    found = {}
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                found[module_name(path)] = path
    return found


def layer_of(module):
    """The index of a module's layer (its subpackage); the package's own __init__ is below every layer.
    A module outside the known subpackages has no layer (None): the test names it."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def package_imports(module, path, known):
    """[(lineno, imported module, at top level)] of one module's imports of the package, plus
    [(lineno, text)] of any other import inside a function or class that is not matplotlib."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    top = {id(node) for node in tree.body}
    is_package = path.endswith("__init__.py")
    here = module.split(".") if is_package else module.split(".")[:-1]
    found, nested_other = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # `from .x import y` imports module x.y when that is a module, else x
            targets = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix
                       for alias in node.names]
        else:
            continue
        at_top = id(node) in top
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                found.append((node.lineno, target, at_top))
            elif not at_top and not target.split(".")[0] in LAZY_ALLOWED:
                nested_other.append((node.lineno, target))
    return found, nested_other


def import_graph(root=LIB):
    """({module: {imported module}}, [problem text]) of the package rooted at root."""
    known = modules(root)
    graph, problems = {}, []
    for module, path in known.items():
        layer = layer_of(module)
        if layer is None:
            problems.append(f"{module}: not in a layer subpackage ({', '.join(LAYERS)})")
            continue
        if path.endswith("__init__.py") and module != PACKAGE and os.path.getsize(path):
            problems.append(f"{module}: a subpackage __init__.py must be empty")
        imports, nested_other = package_imports(module, path, known)
        graph[module] = set()
        for lineno, target, at_top in imports:
            rel = os.path.relpath(path, os.path.dirname(root))
            if not at_top:
                problems.append(f"{rel}:{lineno}: imports {target} inside a function or block")
            target_layer = layer_of(target)
            if target_layer is None or target not in known:
                problems.append(f"{rel}:{lineno}: imports {target}, which is no module of a layer")
                continue
            if target_layer > layer:
                problems.append(f"{rel}:{lineno}: {module} ({LAYERS[layer] if layer >= 0 else 'package'}) imports "
                                f"{target} from the higher layer {LAYERS[target_layer]}")
            graph[module].add(target)
        for lineno, target in nested_other:
            problems.append(f"{os.path.relpath(path, os.path.dirname(root))}:{lineno}: imports {target} inside a "
                            "function (only matplotlib may be imported lazily)")
    return graph, problems


def cycles(graph):
    """Every module that is on an import cycle, as one cycle each (depth-first search, white/grey/black)."""
    state, stack, found = {}, [], []

    def visit(node):
        state[node] = "grey"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "grey":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "black"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


class Layers(unittest.TestCase):
    def test_every_import_goes_down_at_the_top_of_the_file(self):
        graph, problems = import_graph()
        self.assertGreater(len(graph), 20, "the package's modules were found")
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_no_import_cycle(self):
        graph, _ = import_graph()
        found = cycles(graph)
        self.assertEqual(found, [], "\n" + "\n".join(" -> ".join(cycle) for cycle in found))

    def test_the_checker_sees_a_cycle_and_an_upward_import(self):
        """The checker itself, on a graph made by hand: a -> b -> a is a cycle; rules importing render is up."""
        self.assertEqual(cycles({"a": {"b"}, "b": {"a"}}), [["a", "b", "a"]])
        self.assertEqual(cycles({"a": {"b"}, "b": set()}), [])
        self.assertLess(layer_of("cclbench_lib.rules.noise"), layer_of("cclbench_lib.render.compare"))
        self.assertIsNone(layer_of("cclbench_lib.misc.thing"))


if __name__ == "__main__":
    unittest.main()

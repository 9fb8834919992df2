"""Checks of the package's structure, read from the source (no module is imported):

- no import cycle among albert_tf's modules (imports anywhere in a module, in functions too:
  a deferred import hides a cycle from Python, not from the next reader);
- no module uses a private name (leading `_`) of another albert_tf module: neither
  `from albert_tf.x import _name` nor `module._name` on an imported albert_tf module. A private
  module `pkg._m` is private to its package: any module of `pkg` may import it
  (`from albert_tf import _env`, `from albert_tf._lazy import lazy_attributes`).

Both read every module's syntax tree once: about a second for the whole package.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "albert_tf"


def module_name(path, root):
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


class Module:
    """One module's source: its name, whether it is a package, its syntax tree."""

    def __init__(self, path, root):
        self.path = path
        self.root = root
        self.name = module_name(path, root)
        self.is_package = path.name == "__init__.py"
        self.tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def resolve(self, node):
        """The absolute module name of an `ast.ImportFrom` (relative imports included)."""
        if not node.level:
            return node.module
        base = self.name.split(".")
        base = base if self.is_package else base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))


def read_package(root=PACKAGE):
    modules = {}
    for path in sorted(root.rglob("*.py")):
        module = Module(path, root)
        modules[module.name] = module
    return modules


def imports(module, modules):
    """[(line, imported module, bound name, module the name is bound to, attribute)] of
    `module`'s imports of package modules. `import a.b` gives (a.b, "a", a, None); `from a
    import b` gives (a.b, "b", a.b, None) when a.b is a module, else (a, "b", None, "b")."""
    found = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    if alias.asname:
                        bound, to = alias.asname, alias.name
                    else:
                        bound = to = alias.name.split(".")[0]
                    found.append((node.lineno, alias.name, bound, to, None))
        elif isinstance(node, ast.ImportFrom):
            source = module.resolve(node)
            if source not in modules:
                continue
            for alias in node.names:
                bound, child = alias.asname or alias.name, f"{source}.{alias.name}"
                if child in modules:
                    found.append((node.lineno, child, bound, child, None))
                else:
                    found.append((node.lineno, source, bound, None, alias.name))
    return found


def import_graph(modules):
    """{module: {imported package module: first line}}, self-imports left out."""
    graph = {name: {} for name in modules}
    for name, module in modules.items():
        for line, target, _, _, _ in imports(module, modules):
            if target != name:
                graph[name].setdefault(target, line)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def describe_cycle(component, graph):
    edges = [
        f"{a} -> {b} (line {graph[a][b]})"
        for a in component
        for b in sorted(graph[a])
        if b in component
    ]
    return "; ".join(edges)


def private_uses(module, modules, bindings=None):
    """["path:line: what"] for each private name of another package module that `module` uses.

    A private module (`pkg._m`) may be imported by the modules of its package `pkg`; a private
    name of a module, only by that module."""
    bindings = {} if bindings is None else bindings  # module -> {name: module bound to it}

    def bound_in(name):
        if name not in bindings:
            bindings[name] = {
                bound: to for _, _, bound, to, _ in imports(modules[name], modules) if to
            }
        return bindings[name]

    where = module.path.relative_to(module.root.parent)
    found = []
    for line, target, _, to, attribute in imports(module, modules):
        if attribute is not None and is_private(attribute):
            found.append(f"{where}:{line}: from {target} import {attribute}")
        elif to is not None and is_private(target.rsplit(".", 1)[-1]):
            package = target.rsplit(".", 1)[0]
            if not (module.name == package or module.name.startswith(package + ".")):
                found.append(f"{where}:{line}: imports private module {target}")

    def resolved(node):
        if isinstance(node, ast.Name):
            return bound_in(module.name).get(node.id)
        if isinstance(node, ast.Attribute):
            parent = resolved(node.value)
            if parent is None:
                return None
            child = f"{parent}.{node.attr}"
            return child if child in modules else bound_in(parent).get(node.attr)
        return None

    for node in ast.walk(module.tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            owner = resolved(node.value)
            if owner is not None and owner != module.name and f"{owner}.{node.attr}" not in modules:
                found.append(f"{where}:{node.lineno}: {owner}.{node.attr}")
    return sorted(found, key=lambda use: int(use.split(":")[1]))


def all_private_uses(modules):
    bindings = {}
    return [use for module in modules.values() for use in private_uses(module, modules, bindings)]


# --------------------------------------------------------------------------- the checks on a
# small package written for the purpose, so each check is shown to find what it is for.
@pytest.fixture
def toy(tmp_path):
    def make(files):
        root = tmp_path / "toy"
        for name, source in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
        return read_package(root)

    return make


def test_a_cycle_through_a_deferred_import_is_found(toy):
    modules = toy(
        {
            "__init__.py": "",
            "a.py": "from toy import b\n",
            "b.py": "def f():\n    from toy.sub import c\n",
            "sub/__init__.py": "",
            "sub/c.py": "from .. import a\n",
            "d.py": "import toy.a\n",
        }
    )
    graph = import_graph(modules)
    assert cycles(graph) == [["toy.a", "toy.b", "toy.sub.c"]]
    assert "toy.b -> toy.sub.c (line 2)" in describe_cycle(cycles(graph)[0], graph)


def test_private_names_across_modules_are_found(toy):
    modules = toy(
        {
            "__init__.py": "from toy import _env\n",
            "_env.py": "",
            "a.py": "_X = 1\nimport toy.c as c\ndef _f():\n    pass\n",
            "c.py": "from toy import _env\n_Y = 2\n",
            "sub/__init__.py": "",
            "sub/_helpers.py": "",
            "sub/d.py": "from toy.sub import _helpers\nfrom . import _helpers as h\n",
            "b.py": (
                "from toy.a import _X, c\n"
                "from toy import a\n"
                "import toy.c\n"
                "a._f()\n"
                "a.c._Y\n"
                "toy.c._Y\n"
                "from toy._env import thing\n"
                "class K:\n    def m(self):\n        return self._z\n"
                "from toy.sub import _helpers\n"
            ),
        }
    )
    assert all_private_uses(modules) == [
        "toy/b.py:1: from toy.a import _X",
        "toy/b.py:4: toy.a._f",
        "toy/b.py:5: toy.c._Y",
        "toy/b.py:6: toy.c._Y",
        "toy/b.py:11: imports private module toy.sub._helpers",
    ]


# --------------------------------------------------------------------------- albert_tf itself
def test_no_import_cycle():
    graph = import_graph(read_package())
    found = cycles(graph)
    assert not found, "import cycles: " + " | ".join(describe_cycle(c, graph) for c in found)


def test_no_private_name_used_across_modules():
    found = all_private_uses(read_package())
    assert not found, "private names used across modules:\n" + "\n".join(found)

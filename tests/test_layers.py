"""The package's import graph: two wings (``tribes``, ``gossip``) on one
runtime (``_runtime``), the tools above both, and the lazy ``mcastmember``
above all (docs/design.md, "Layers"). Within a wing, layers import only
downward; neither wing imports the other; the runtime imports neither; no
private name crosses modules; no import circles.

Every module of the installed package is parsed (``ast``; a compiled
kernel's ``.pyx`` by its ``from`` lines), each of its imports of the package
resolved to a module, and that module's place compared with the importer's.
Imports under ``if TYPE_CHECKING:`` count too: a type is a dependency.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mcastmember

PACKAGE = Path(mcastmember.__file__).parent

# Where each module sits: (place, rank in that place). A module may import
# the runtime, its own place at its rank or below, and (tools and the api)
# every place below them. Lowest first within a wing.
WINGS = {
    "tribes": {
        "wire": 0,          # bytes only: layout, schema, trailer, Java serialization, the codec's error
        "kernel": 1,        # the compiled heartbeat kernel, its pure-Python twin, the choice between them
        "net": 2,           # network cards
        "discovery": 3,     # peer lists and DNS
        "engine": 4,        # the sans-IO protocol: table, detector, engine, settings, channel
        "fronts": 5,        # the engine driven by sockets and a clock: threads, asyncio, TCP listener
    },
    "gossip": {
        "memberlist": 0,    # memberlist's wire, matcher and sans-IO engine
        "serf": 1,          # Serf's layer on memberlist, sans-IO
        "fronts": 2,        # the Serf node driven by sockets and a clock: threads, asyncio
        "agent": 2,         # what Serf's agent adds around a member (handlers, RPC): beside the fronts,
                            # which run the handlers their settings name; the circle rule keeps the two apart
    },
}
# Above both wings: the CLI, its live views, the doctor, the metrics server.
TOOLS = {"tools", "metrics", "__main__"}
KERNELS = {"mcastmember.tribes.kernel._fast", "mcastmember.tribes.kernel._fast_py",
           "mcastmember.gossip.memberlist._matcher", "mcastmember.gossip.memberlist._matcher_py"}
# The kernels' modules are private by the project's layout (_fast.pyx beside
# _fast_py.py): importing them is how the module that chooses reaches one.
PRIVATE_ALLOWED = KERNELS | {"mcastmember._runtime"}


def place(module: str) -> tuple[str, int]:
    """(place, rank): "runtime" 0, a wing and its layer's rank, "tools", "api"."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__init__":
        return ("api", 0)
    if parts[1] == "_runtime":
        return ("runtime", 0)
    if parts[1] in TOOLS:
        return ("tools", 0)
    wing = WINGS.get(parts[1])
    assert wing is not None, f"{module} is in no wing, nor the runtime or the tools"
    if len(parts) == 2:
        return (parts[1], -1)           # the wing's own __init__
    assert parts[2] in wing, f"{module} is in no layer of {parts[1]}"
    return (parts[1], wing[parts[2]])


def allowed(importer: str, target: str) -> bool:
    (mine, my_rank), (theirs, their_rank) = place(importer), place(target)
    if theirs == "runtime":
        return True
    if mine == "api":
        return True
    if mine == "tools":
        return theirs != "api"
    if mine == "runtime":
        return False
    # a wing: its own layers at or below its rank (its __init__ re-exports from all)
    if theirs != mine:
        return False
    return my_rank == -1 or 0 <= their_rank <= my_rank


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")) + sorted(PACKAGE.rglob("*.pyx")):
        parts = ["mcastmember", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(module: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(imported module, name taken from it or None, line) of each package import."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    known = modules()
    out: list[tuple[str, str | None, int]] = []

    def resolve(level: int, base: str | None, names: list[str], line: int) -> None:
        if level:
            parts = package.split(".")
            if level > 1:
                parts = parts[:-(level - 1)]
            base = ".".join(parts + ([base] if base else []))
        assert base is not None
        if not base.startswith("mcastmember"):
            return
        for name in names:
            if f"{base}.{name}" in known:
                out.append((f"{base}.{name}", None, line))
            else:
                out.append((base, name, line))

    if path.suffix == ".pyx":
        for number, text in enumerate(path.read_text().splitlines(), 1):
            match = re.match(r"\s*from (\.+)(\S*) import (.+)", text)
            if match:
                names = [n.split(" as ")[0].strip() for n in match.group(3).split(",")]
                resolve(len(match.group(1)), match.group(2) or None, names, number)
        return out
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            resolve(node.level, node.module, [a.name for a in node.names], node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mcastmember"):
                    out.append((alias.name, None, node.lineno))
    return out


def _private(module: str, name: str | None) -> bool:
    if module in PRIVATE_ALLOWED and name is None:
        return False
    parts = module.split(".") + ([name] if name else [])
    # A private part is fine where it names an allowed module (a kernel, the runtime).
    return any(p.startswith("_") and not p.startswith("__") and ".".join(parts[:i + 1]) not in PRIVATE_ALLOWED
               for i, p in enumerate(parts) if i)


def test_every_module_is_in_a_wing_the_runtime_or_the_tools():
    for module in modules():
        place(module)        # asserts


def test_no_module_imports_up_a_layer_or_across_the_wings():
    wrong = []
    for module, path in modules().items():
        for target, _name, line in imports(module, path):
            if target == "mcastmember" or target == module:
                continue      # the package's own __version__, a module's own name
            if not allowed(module, target):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} ({place(module)[0]}) imports "
                             f"{target} ({place(target)[0]})")
    assert wrong == []


def test_every_package_import_names_a_module_that_exists():
    """A relative import one dot short (``from ..discovery`` inside a
    subpackage) names no module: it fails only when that line runs."""
    known = modules()
    missing = [f"{path.relative_to(PACKAGE)}:{line} imports {target}"
               for module, path in known.items()
               for target, _name, line in imports(module, path)
               if target != "mcastmember" and target not in known]
    assert missing == []


def test_no_private_name_crosses_modules():
    crossing = []
    for module, path in modules().items():
        for target, name, line in imports(module, path):
            if target != module and _private(target, name):
                crossing.append(f"{path.relative_to(PACKAGE)}:{line} imports "
                                f"{target}{'.' + name if name else ''}")
    assert crossing == []


def test_the_rule_sees_an_upward_import_a_crossing_and_a_private_name():
    """The checks above are not vacuous: the resolver finds what they look for."""
    found = imports("mcastmember", PACKAGE / "__init__.py")
    assert any(target == "mcastmember.tribes.fronts.service" for target, _n, _l in found)
    assert not allowed("mcastmember.tribes.engine.table", "mcastmember.tribes.fronts.service")
    assert not allowed("mcastmember.gossip.fronts.driver", "mcastmember.tribes.engine.events")
    assert not allowed("mcastmember.tribes.fronts.driver", "mcastmember.gossip.serf.node")
    assert not allowed("mcastmember._runtime.events", "mcastmember.tribes.engine.events")
    assert allowed("mcastmember.gossip.fronts.driver", "mcastmember._runtime.listen")
    assert allowed("mcastmember.tools.cli", "mcastmember.gossip.fronts.service")
    assert _private("mcastmember.tribes.fronts.channel_listener", "_family")
    assert not _private("mcastmember.tribes.kernel.codec", None)
    assert _private("mcastmember.tribes.kernel.codec", "_internal")


def _package_imports(module: str, path: Path) -> set[str]:
    """Every package module ``module`` imports: at its top level, inside a
    function and under ``if TYPE_CHECKING:`` alike (a type is a dependency,
    and an import a function makes is one waiting to happen)."""
    return {t for t, _n, _l in imports(module, path) if t != module}


def _circles(graph: dict[str, set[str]]) -> list[str]:
    """Each circle found walking ``graph`` (module -> the modules it imports),
    as "a -> b -> a"."""
    circles = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join(stack[stack.index(nxt):] + [node, nxt]) if nxt in stack
                               else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    return circles


def test_no_import_circles():
    """No module imports a module that imports it back (through any chain,
    by any import: at the top, in a function, for a type only): each can be
    read, loaded and tested on its own."""
    known = modules()
    graph = {m: {t for t in _package_imports(m, p) if t in known} for m, p in known.items()}
    assert _circles(graph) == []


def test_the_circle_rule_sees_an_import_made_for_a_type_only(tmp_path):
    """A check module that imports its caller's module for a type (under
    TYPE_CHECKING) closes a circle the rule reports."""
    (tmp_path / "session.py").write_text("from . import local\n")
    (tmp_path / "local.py").write_text("from typing import TYPE_CHECKING\n"
                                       "if TYPE_CHECKING:\n    from .session import Doctor\n")
    doctor = "mcastmember.tools.doctor"
    graph = {f"{doctor}.{name}": _package_imports(f"{doctor}.{name}", tmp_path / f"{name}.py")
             for name in ("session", "local")}
    assert _circles(graph) == [f"{doctor}.local -> {doctor}.session -> {doctor}.local"]


def _loaded_by(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    # from the root folder: the installed package, never the source checkout
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert done.stderr == ""
    return done.stdout.split()


@pytest.mark.parametrize("name", ["SerfService", "AsyncSerfService"])
def test_a_gossip_service_loads_nothing_of_tribes(name):
    pytest.importorskip("msgpack", reason="the gossip extra is not installed")
    pytest.importorskip("cryptography", reason="the gossip extra is not installed")
    loaded = _loaded_by(f"from mcastmember import {name}")
    assert [m for m in loaded if m.startswith("mcastmember.tribes")] == []
    assert f"mcastmember.gossip.fronts.{'aio' if name.startswith('Async') else 'service'}" in loaded


@pytest.mark.parametrize("name", ["McastService", "AsyncMcastService"])
def test_a_tribes_service_loads_nothing_of_gossip_nor_its_packages(name):
    loaded = _loaded_by(f"from mcastmember import {name}")
    assert [m for m in loaded if m.startswith(("mcastmember.gossip", "msgpack", "cryptography", "re2"))] == []
    assert "mcastmember.tribes.kernel.codec" in loaded


def test_the_gossip_matcher_is_in_the_gossip_layer_and_imports_nothing_of_the_package():
    found = modules()
    assert {"mcastmember.gossip.memberlist._matcher", "mcastmember.gossip.memberlist._matcher_py"} <= set(found)
    assert place("mcastmember.gossip.memberlist._matcher") == ("gossip", 0)
    assert imports("mcastmember.gossip.memberlist._matcher", found["mcastmember.gossip.memberlist._matcher"]) == []
    assert imports("mcastmember.gossip.memberlist._matcher_py", found["mcastmember.gossip.memberlist._matcher_py"]) == []


# The data path: a Tribes front moves bytes through the engine's DataPath
# and nothing else. The table and the heartbeat packet stay the engine's: no
# front names them (not even as a type), reads ``.table`` or ``.targets``, or
# calls the kernel's data-path methods on anything but the data path.
ENGINE_INSIDES = {"Membership", "HeartbeatPacket", "MemberIndex", "Targets"}
ENGINE_ATTRIBUTES = {"table", "targets"}
DATA_PATH_CALLS = {"pump", "pending", "source", "send_to", "stamp", "stamp_now", "set_key"}


def _data_path_reaches(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in ENGINE_INSIDES:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.alias) and node.name.rpartition(".")[2] in ENGINE_INSIDES:
            found.append(f"imports {node.name}")
        elif isinstance(node, ast.Attribute) and node.attr in ENGINE_ATTRIBUTES:
            found.append(f"{node.lineno}: .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in DATA_PATH_CALLS | {"send"}
              and not _is_socket_or_data_path(node.func.value, node.func.attr)):
            found.append(f"{node.lineno}: {ast.unparse(node.func)}()")
    return sorted(found)


def _is_socket_or_data_path(receiver: ast.expr, method: str) -> bool:
    """The data path (``data_path``/``path``), or for ``send`` a socket: the
    fronts' sockets are attributes named ``sock`` or ``_wake_w``."""
    text = ast.unparse(receiver)
    if re.search(r"(^|\.|_)(data_)?path$", text):
        return True
    return method == "send" and re.search(r"(sock|_wake_w)$", text) is not None


def test_no_front_reaches_past_the_data_path():
    reaches = {}
    for module, path in modules().items():
        if module.startswith("mcastmember.tribes.fronts."):
            found = _data_path_reaches(ast.parse(path.read_text()))
            if found:
                reaches[module] = found
    assert reaches == {}


def test_the_data_path_rule_sees_a_table_a_packet_and_a_pump():
    code = ("from ..engine.table import Membership\n"
            "def drain(engine, fd, buf, packet, sock, data_path):\n"
            "    engine.table.get(1)\n"
            "    n = table.pump(fd, buf, 0.0)\n"
            "    packet.send(fd)\n"
            "    data_path.pump(fd, buf, 0.0)\n"
            "    sock.send(buf)\n")
    assert _data_path_reaches(ast.parse(code)) == [
        "3: .table", "4: table.pump()", "5: packet.send()", "imports Membership"]


# The compiled kernels and their pure-Python twins define the same classes on purpose.
TWINS = {("mcastmember.tribes.kernel._fast", "mcastmember.tribes.kernel._fast_py"),
         ("mcastmember.gossip.memberlist._matcher", "mcastmember.gossip.memberlist._matcher_py")}


def test_one_meaning_per_class_name():
    """No class name is defined in two modules (a twin and its kernel aside):
    a reader meeting a name knows which one it is."""
    where: dict[str, set[str]] = {}
    for module, path in modules().items():
        text = path.read_text()
        if path.suffix == ".pyx":
            names = re.findall(r"^(?:cdef )?class (\w+)", text, re.M)
        else:
            names = [n.name for n in ast.parse(text).body if isinstance(n, ast.ClassDef)]
        for name in names:
            where.setdefault(name, set()).add(module)
    twins = {frozenset(pair) for pair in TWINS}
    assert {name: sorted(found) for name, found in where.items()
            if len(found) > 1 and frozenset(found) not in twins} == {}

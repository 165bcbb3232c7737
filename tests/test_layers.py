"""The package's import graph: layers import only downward, and no private
name crosses modules (docs/design.md, "Layers").

Every module of the installed package is parsed (``ast``; the compiled
kernel's ``.pyx`` by its ``from`` lines), each of its imports of the package
resolved to a module, and that module's layer compared with the importer's.
Imports under ``if TYPE_CHECKING:`` count too: a type is a dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mcastmember

PACKAGE = Path(mcastmember.__file__).parent

# Lowest first: a module may import its own layer and the layers before it.
RANKS = {
    "wire": 0,          # bytes only: layout, schema, trailer, Java serialization, errors
    "kernel": 1,        # the compiled kernel and its pure-Python twin, and the choice between them
    "transport": 2,     # sockets and network cards
    "discovery": 3,     # peer lists and DNS
    "engine": 4,        # the sans-IO protocol: table, detector, engine, settings, channel
    "gossip": 4,        # the second membership protocol, beside the engine
    "fronts": 5,        # the engine driven by sockets and a clock: threads, asyncio, listener, metrics
    "tools": 6,         # the CLI, its live view, the doctor
    "api": 7,           # mcastmember itself (the lazy re-exports) and python -m mcastmember
}
KERNEL = {"mcastmember._fast", "mcastmember._fast_py", "mcastmember._codec"}
# The gossip hot path's matcher, compiled and its pure-Python twin: in the
# gossip layer (it imports nothing of the package), chosen by gossip/hot.py.
GOSSIP_KERNEL = {"mcastmember.gossip._hot", "mcastmember.gossip._hot_py"}
# The kernels' modules are private by the project's layout (mcastmember/_fast.pyx):
# importing them is how the layers above reach a kernel.
PRIVATE_ALLOWED = KERNEL | GOSSIP_KERNEL


def layer(module: str) -> str:
    if module in KERNEL:
        return "kernel"
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__init__", "__main__"):
        return "api"
    assert parts[1] in RANKS, f"{module} is in no layer folder"
    return parts[1]


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
    parts = module.split(".")[1:] + ([name] if name else [])
    return any(p.startswith("_") and not p.startswith("__") for p in parts
               if ".".join(["mcastmember", p]) not in PRIVATE_ALLOWED)


def test_every_module_is_in_a_layer_folder():
    for module in modules():
        layer(module)        # asserts


def test_no_module_imports_a_layer_above_it():
    upward = []
    for module, path in modules().items():
        mine = RANKS[layer(module)]
        for target, _name, line in imports(module, path):
            if target == "mcastmember" or target == module:
                continue      # the package's own __version__, a module's own name
            theirs = RANKS[layer(target)]
            if theirs > mine:
                upward.append(f"{path.relative_to(PACKAGE)}:{line} ({layer(module)}) imports "
                              f"{target} ({layer(target)})")
    assert upward == []


def test_every_package_import_names_a_module_that_exists():
    """A relative import one dot short (``from ..discovery`` inside a
    subpackage) names no module: it fails only when that line runs."""
    known = modules()
    missing = [f"{path.relative_to(PACKAGE)}:{line} imports {target}"
               for module, path in known.items()
               for target, _name, line in imports(module, path)
               if target != "mcastmember" and target not in known]
    assert missing == []


def test_gossip_imports_only_the_wire_layer():
    """The second protocol shares the errors, nothing of Tribes' engine or fronts."""
    found = [f"{path.relative_to(PACKAGE)}:{line} imports {target}"
             for module, path in modules().items() if layer(module) == "gossip"
             for target, _name, line in imports(module, path)
             if layer(target) not in ("gossip", "wire")]
    assert found == []


def test_no_private_name_crosses_modules():
    crossing = []
    for module, path in modules().items():
        for target, name, line in imports(module, path):
            if target != module and _private(target, name):
                crossing.append(f"{path.relative_to(PACKAGE)}:{line} imports "
                                f"{target}{'.' + name if name else ''}")
    assert crossing == []


def test_the_rule_sees_an_upward_import_and_a_private_name():
    """The checks above are not vacuous: the resolver finds what they look for."""
    found = imports("mcastmember", PACKAGE / "__init__.py")
    assert ("mcastmember.fronts.service", "McastService", found[0][2]) in found or any(
        target == "mcastmember.fronts.service" for target, _n, _l in found)
    assert RANKS[layer("mcastmember.fronts.service")] > RANKS[layer("mcastmember.engine.table")]
    assert _private("mcastmember.fronts.tribes_listener", "_family")
    assert not _private("mcastmember._codec", None)
    assert _private("mcastmember._codec", "_internal")


def test_the_gossip_matcher_is_in_the_gossip_layer_and_imports_nothing_of_the_package():
    found = modules()
    assert {"mcastmember.gossip._hot", "mcastmember.gossip._hot_py"} <= set(found)
    assert layer("mcastmember.gossip._hot") == "gossip"
    assert imports("mcastmember.gossip._hot", found["mcastmember.gossip._hot"]) == []
    assert imports("mcastmember.gossip._hot_py", found["mcastmember.gossip._hot_py"]) == []


# The data path (issue 25): a front moves bytes through the engine's DataPath
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
        if layer(module) == "fronts":
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

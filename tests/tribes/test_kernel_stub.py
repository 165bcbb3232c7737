"""The stub the type checkers read for the compiled module (_fast.pyi) says
what both implementations really offer: every public function, class,
method and attribute it names exists in the pure-Python twin and in the
compiled module with the same parameters (names, kinds, defaults), and
neither implementation has a public name the stub lacks."""

import ast
import importlib.resources
import inspect
import re
import socket

import pytest

from support import heartbeat

STUB = ast.parse((importlib.resources.files("mcastmember.tribes.kernel") / "_fast.pyi").read_text())
STUB_FUNCTIONS = {node.name: node for node in STUB.body if isinstance(node, ast.FunctionDef)}
STUB_CLASSES = {node.name: node for node in STUB.body if isinstance(node, ast.ClassDef)}
STUB_CONSTANTS = {node.target.id for node in STUB.body
                  if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
CONSTRUCTOR = {"__init__", "__new__"}
# The compiled module's source ships with it (package data).
PYX = (importlib.resources.files("mcastmember.tribes.kernel") / "_fast.pyx").read_text()


def public(name):
    return not name.startswith("_")


def stub_parameters(function):
    """[(name, kind, default)] of a stub function, ``self``/``cls`` left out,
    in inspect's terms."""
    args = function.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = []
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        kind = (inspect.Parameter.POSITIONAL_ONLY if i < len(args.posonlyargs)
                else inspect.Parameter.POSITIONAL_OR_KEYWORD)
        out.append((arg.arg, kind, _literal(default)))
    if args.vararg:
        out.append((args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        out.append((arg.arg, inspect.Parameter.KEYWORD_ONLY, _literal(default)))
    if args.kwarg:
        out.append((args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty))
    if isinstance(function, ast.FunctionDef) and function.name != "<lambda>" and out \
            and out[0][0] in ("self", "cls"):
        out = out[1:]
    return out


def _literal(node):
    return inspect.Parameter.empty if node is None else ast.literal_eval(node)


def runtime_parameters(function, bound=False):
    params = list(inspect.signature(function).parameters.values())
    if bound and params and params[0].name in ("self", "cls"):
        params = params[1:]
    return [(p.name, p.kind, p.default) for p in params]


def stub_members(cls):
    """({method name: node}, {attribute name}) of a stub class: properties are
    attributes."""
    methods, attributes = {}, set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            if any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                attributes.add(node.name)
            else:
                methods[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            attributes.add(node.target.id)
    return methods, attributes


def sample(codec, name):
    """An instance of the implementation's class ``name``."""
    if name == "HeartbeatPacket":
        return codec.HeartbeatPacket(heartbeat(port=4000))
    if name == "MemberIndex":
        return codec.MemberIndex(8)
    if name == "Targets":
        return codec.Targets([(b"\x7f\x00\x00\x01", 45564)], socket.AF_INET)
    raise AssertionError(f"no sample for {name}: add one")


def test_the_stub_names_every_public_name_of_both_implementations(codec):
    names = {name for name in dir(codec) if public(name)
             and not inspect.ismodule(getattr(codec, name))}
    stubbed = set(STUB_FUNCTIONS) | set(STUB_CLASSES) | STUB_CONSTANTS
    # the twin's imports, not its API
    imported = {"MalformedPacket", "OrderedDict", "TYPE_CHECKING", "annotations"}
    assert names - imported == {name for name in stubbed if public(name)} - {"Peer"}


@pytest.mark.parametrize("name", sorted(STUB_FUNCTIONS))
def test_functions_take_the_stubs_parameters(codec, name):
    assert runtime_parameters(getattr(codec, name)) == stub_parameters(STUB_FUNCTIONS[name])


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
def test_classes_have_the_stubs_methods_and_attributes(codec, name):
    methods, attributes = stub_members(STUB_CLASSES[name])
    instance = sample(codec, name)
    runtime = {attr for attr in dir(instance) if public(attr)}
    assert runtime == {m for m in methods if public(m)} | attributes
    for method in methods:
        if method in CONSTRUCTOR:
            continue
        assert runtime_parameters(getattr(instance, method)) == \
            stub_parameters(methods[method]), method


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
def test_constructors_take_the_stubs_parameters(codec, name):
    methods, _ = stub_members(STUB_CLASSES[name])
    constructor = [methods[m] for m in CONSTRUCTOR if m in methods]
    assert len(constructor) == 1, "the stub gives one constructor"
    expected = stub_parameters(constructor[0])
    cls = getattr(codec, name)
    try:
        actual = runtime_parameters(cls)
    except ValueError:
        # A compiled class made in __cinit__ shows no signature: compare
        # with the __cinit__ _fast.pyx declares, and call the built class
        # with every parameter by keyword, as the stub names them.
        assert pyx_constructor(name) == expected
        positional = sample_arguments(name)
        keywords = {pname: (positional[pname] if default is inspect.Parameter.empty
                            else default) for pname, _, default in expected}
        cls(**keywords)
        return
    assert actual == expected


def sample_arguments(name):
    return {"HeartbeatPacket": {"packet": heartbeat(port=4000)},
            "MemberIndex": {"capacity": 8},
            "Targets": {"peers": [(b"\x7f\x00\x00\x01", 45564)], "family": socket.AF_INET},
            }[name]


def pyx_constructor(name):
    """[(name, kind, default)] of the __cinit__ of class ``name`` in
    _fast.pyx, its C types left out: the same terms as stub_parameters."""
    match = re.search(rf"^cdef class {name}\b.*?^    def __cinit__\((.*?)\):", PYX,
                      re.MULTILINE | re.DOTALL)
    assert match, f"no __cinit__ for {name} in _fast.pyx"
    # "int64_t alive_cap=-1" -> "alive_cap=-1": what is left parses as Python.
    untyped = [re.sub(r"^.*\s(\w+\s*(=.*)?)$", r"\1", part.strip())
               for part in match.group(1).split(",")]
    return stub_parameters(ast.parse(f"def __cinit__({', '.join(untyped)}): ...").body[0])

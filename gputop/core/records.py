"""Records: dataclasses that cost nothing to define (``@frozen``, and ``@mutable``).

``dataclass`` compiles the source of every method it writes: about 4.8M instructions for a
frozen class of eight fields, and the dashboard defines more than a hundred before its
first frame, most of them never made before it (docs/speed.md). ``frozen`` makes the class
with ``dataclass`` writing no method, so its fields, ``fields``, ``replace``, ``asdict``,
``__match_args__`` and slots are the dataclass's own, then gives it the same methods:
``__init__``, ``__eq__`` and ``__hash__`` are compiled from the dataclass's source when
first called (a class whose objects are never made, compared or hashed compiles nothing),
``__repr__``, ``__setattr__`` and ``__delattr__`` are closures over the field names. A
slotted record's ``__init__`` stores each field through its slot's descriptor, not
``object.__setattr__``: about half the time, and a busy sample makes thousands.
``inspect.signature`` of the class is made from the fields when asked. ``@mutable`` is
``dataclass(slots=..., eq=...)`` made the same way.
``tests/unit/test_records.py`` holds frozen classes to ``dataclass``'s behaviour.
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

_Class = TypeVar("_Class", bound=type)
_Function = TypeVar("_Function")

if TYPE_CHECKING:  # for type checkers only: gputop's core needs no typing_extensions
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: object) -> Callable[[_Function], _Function]:
        return lambda function: function


_Object = TypeVar("_Object")
_MISSING = dataclasses.MISSING
_Fields = tuple[dataclasses.Field[Any], ...]


class _Factory:
    """The default of a parameter whose field's default is made by a factory."""

    def __repr__(self) -> str:
        return "<factory>"  # as the dataclass's signature shows it


_FACTORY = _Factory()


@overload
def frozen(cls: _Class, /) -> _Class: ...
@overload
def frozen(*, slots: bool = True, kw_only: bool = False) -> Callable[[_Class], _Class]: ...


@dataclass_transform(frozen_default=True)
def frozen(cls: type | None = None, /, *, slots: bool = True, kw_only: bool = False) -> Any:
    """``@dataclass(frozen=True, slots=slots, kw_only=kw_only)``, nothing compiled."""
    if cls is None:
        return lambda cls: _record(cls, slots, kw_only, True, True)
    return _record(cls, slots, kw_only, True, True)


@overload
def mutable(cls: _Class, /) -> _Class: ...
@overload
def mutable(*, slots: bool = False, eq: bool = True) -> Callable[[_Class], _Class]: ...


@dataclass_transform()
def mutable(cls: type | None = None, /, *, slots: bool = False, eq: bool = True) -> Any:
    """``@dataclass(slots=slots, eq=eq)``, nothing compiled."""
    if cls is None:
        return lambda cls: _record(cls, slots, False, False, eq)
    return _record(cls, slots, False, False, eq)


def _record(cls: type, slots: bool, kw_only: bool, is_frozen: bool, eq: bool) -> type:
    own = dict(cls.__dict__)
    documented = bool(cls.__doc__)
    made: type[Any] = dataclasses.dataclass(
        cls, init=False, repr=False, eq=False, slots=slots, kw_only=kw_only
    )
    specs = dataclasses.fields(made)
    _check_defaults(specs)
    compared = [s.name for s in specs if s.compare]
    init = (made, specs, slots, is_frozen)
    methods: dict[str, Any] = {
        "__init__": _on_first_call(made, "__init__", lambda: _init_source(*init)),
        "__repr__": _repr([s.name for s in specs if s.repr]),
    }
    if eq:
        methods["__eq__"] = _on_first_call(made, "__eq__", lambda: _eq_source(compared))
    if is_frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in own:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
        hashed = [s.name for s in specs if (s.compare if s.hash is None else s.hash)]
        names = frozenset(s.name for s in specs)
        methods.update(
            __hash__=_on_first_call(made, "__hash__", lambda: _hash_source(hashed)),
            __setattr__=_frozen_setattr(made, names),
            __delattr__=_frozen_delattr(made, names),
        )
        if slots:  # the dataclass's own pickling of a frozen slotted class
            methods.update(__getstate__=_getstate, __setstate__=_setstate)
    elif eq:
        methods["__hash__"] = None  # the dataclass's: a mutable object compared by value
    for name, method in methods.items():
        # a class's own method is kept; its own __hash__ too, unless it is the None that
        # Python sets for a class with its own __eq__ (the dataclass's rule)
        if name not in own or (name == "__hash__" and own[name] is None):
            if method is not None and name not in ("__getstate__", "__setstate__"):
                method.__qualname__ = f"{made.__qualname__}.{name}"
            setattr(made, name, method)
    params = made.__dataclass_params__
    params.init = params.repr = True
    params.eq, params.frozen = eq, is_frozen
    made.__signature__ = _Signature(specs)
    if not documented:  # the dataclass's docstring: the class's name and signature
        made.__doc__ = made.__name__ + str(_signature(specs)).replace(" -> None", "")
    return made


class _Signature:
    """The class's ``__signature__``, made when ``inspect.signature`` first asks for it (the
    dataclass's ``__init__``'s, which is not compiled before the first object)."""

    def __init__(self, specs: _Fields) -> None:
        self._specs = specs
        self._made: inspect.Signature | None = None

    def __get__(self, obj: object, owner: type | None = None) -> inspect.Signature:
        if self._made is None:
            self._made = _signature(self._specs)
        return self._made


def _eq_source(names: list[str]) -> tuple[str, dict[str, Any]]:
    both = "".join(f"self.{name}," for name in names), "".join(f"other.{name}," for name in names)
    lines = [
        "def __eq__(self, other):",
        " if other.__class__ is self.__class__:",
        f"  return ({both[0]})==({both[1]})",
        " return NotImplemented",
    ]
    return "\n".join(lines), {}


def _hash_source(names: list[str]) -> tuple[str, dict[str, Any]]:
    fields = "".join(f"self.{name}," for name in names)
    return f"def __hash__(self):\n return hash(({fields}))", {}


def _repr(names: list[str]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        shown = ", ".join([f"{name}={getattr(self, name)!r}" for name in names])
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _frozen_setattr(cls: type[Any], names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: type[Any], names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


def _getstate(self: object) -> list[Any]:
    return [getattr(self, spec.name) for spec in dataclasses.fields(self)]  # type: ignore[arg-type]


def _setstate(self: object, state: list[Any]) -> None:
    for spec, value in zip(dataclasses.fields(self), state, strict=False):  # type: ignore[arg-type]
        object.__setattr__(self, spec.name, value)


def _on_first_call(cls: type, name: str, source: Callable[[], tuple[str, dict[str, Any]]]) -> Any:
    """A method that, when first called, compiles the class's own (the dataclass's source,
    from ``source``), puts it in its place and calls it: a class whose objects are never
    made, compared or hashed compiles nothing."""

    def first_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        text, names = source()
        names.update(__name__=cls.__module__)
        scope: dict[str, Any] = {}
        # Made of the class's own field names only, as the dataclass's; compiled without
        # this module's ``annotations`` future: the annotations are the fields' types.
        code = compile(text, f"<{cls.__qualname__}.{name}>", "exec", dont_inherit=True)
        exec(code, names, scope)
        method = scope[name]
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        if cls.__dict__.get(name) is first_call:
            setattr(cls, name, method)
        return method(self, *args, **kwargs)

    return first_call


def _check_defaults(specs: _Fields) -> None:
    """The dataclass's refusal of a parameter without a default after one with."""
    after = None
    for spec in specs:
        if not spec.init or spec.kw_only:
            continue
        if spec.default is not _MISSING or spec.default_factory is not _MISSING:
            after = spec.name
        elif after is not None:
            raise TypeError(f"non-default argument {spec.name!r} follows default argument")


def _init_source(
    cls: type, specs: _Fields, slots: bool, frozen: bool
) -> tuple[str, dict[str, Any]]:
    """The dataclass's ``__init__``: its parameters, defaults and assignments; a frozen
    class's fields stored through their slots' descriptors where it has slots, a mutable
    class's by assignment, as the dataclass's are."""
    names: dict[str, Any] = {
        "_object_setattr": object.__setattr__,
        "_factory": _FACTORY,
    }
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for spec in specs:
        name = spec.name
        names[f"_set_{name}"] = cls.__dict__[name].__set__ if slots and frozen else None
        names[f"_type_{name}"] = spec.type
        value, default = name, ""
        if spec.default_factory is not _MISSING:
            names[f"_new_{name}"] = spec.default_factory
            value = f"_new_{name}() if {name} is _factory else {name}"
            value, default = (value if spec.init else f"_new_{name}()"), "=_factory"
        elif spec.default is not _MISSING:
            names[f"_default_{name}"] = spec.default
            value, default = (name if spec.init else f"_default_{name}"), f"=_default_{name}"
        if spec.init:
            (keyword if spec.kw_only else positional).append(f"{name}:_type_{name}{default}")
        elif value == name or (not slots and spec.default_factory is _MISSING):
            continue  # the dataclass leaves it unset: the class's attribute is its default
        if slots and frozen:
            body.append(f" _set_{name}(self, {value})")
        elif frozen:
            body.append(f" _object_setattr(self, {name!r}, {value})")
        else:
            body.append(f" self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append(" self.__post_init__()")
    params = ["self", *positional, *(["*", *keyword] if keyword else [])]
    source = f"def __init__({', '.join(params)}) -> None:\n" + ("\n".join(body) or " pass")
    return source, names


def _signature(specs: _Fields) -> inspect.Signature:
    """The signature the dataclass's ``__init__`` has (for the docstring it makes)."""
    parameters = []
    for spec in sorted(specs, key=lambda spec: bool(spec.kw_only)):
        if not spec.init:
            continue
        default: Any = inspect.Parameter.empty
        if spec.default_factory is not _MISSING:
            default = _FACTORY
        elif spec.default is not _MISSING:
            default = spec.default
        kind = (
            inspect.Parameter.KEYWORD_ONLY
            if spec.kw_only
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        parameters.append(inspect.Parameter(spec.name, kind, default=default, annotation=spec.type))
    return inspect.Signature(parameters, return_annotation=None)


def replaced(obj: _Object, /, **changes: Any) -> _Object:
    """``dataclasses.replace(obj, **changes)`` without its walk over the fields' flags (each
    GPU of a sample is replaced twice, forty-odd fields each): each field from the changes,
    else from the object, through the class's ``__init__``; a field it does not have, or
    one not in ``__init__``, is a TypeError."""
    replace = _replacers.get(type(obj))
    if replace is None:
        replace = _replacers[type(obj)] = _replacer(type(obj))
    return replace(obj, changes)


def _replacer(cls: type) -> Callable[[Any, dict[str, Any]], Any]:
    specs = [spec for spec in dataclasses.fields(cls) if spec.init]
    arguments = [f"pop({s.name!r}, obj.{s.name})" for s in specs if not s.kw_only]
    arguments += [f"{s.name}=pop({s.name!r}, obj.{s.name})" for s in specs if s.kw_only]
    lines = [
        "def replace(obj, changes):",
        " pop = changes.pop",
        f" new = _cls({', '.join(arguments)})",
        " if changes:",
        "  raise TypeError(_cls.__name__, *changes)",
        " return new",
    ]
    names: dict[str, Any] = {"_cls": cls, "__name__": cls.__module__}
    exec("\n".join(lines), names)  # made of the class's own field names only
    return names["replace"]


_replacers: dict[type, Callable[[Any, dict[str, Any]], Any]] = {}

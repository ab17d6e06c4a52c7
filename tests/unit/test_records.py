"""``frozen`` makes the class ``dataclass(frozen=True)`` makes, without compiling at
definition (gputop/core/records.py): each case below is defined twice, once by each, and
every behaviour a caller can see is compared."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
from dataclasses import KW_ONLY, field
from typing import Any

import pytest

from gputop.core.records import frozen, mutable, replaced


def _pair(body: dict[str, Any], slots: bool = True, kw_only: bool = False) -> tuple[type, type]:
    """The class of ``body`` (its annotations and defaults) by dataclass and by record."""

    def make(decorate: Any, name: str) -> type:
        namespace = {k: copy.copy(v) for k, v in body.items()}
        namespace["__module__"] = __name__
        namespace["__qualname__"] = name
        return decorate(type(name, (), namespace))

    by_dataclass = make(dataclasses.dataclass(frozen=True, slots=slots, kw_only=kw_only), "Case")
    by_record = make(frozen(slots=slots, kw_only=kw_only), "Case")
    return by_dataclass, by_record


PLAIN = {
    "__doc__": "A case.",
    "__annotations__": {"a": "int", "b": "float", "c": "str", "d": "tuple[int, ...]"},
    "b": 0.5,
    "c": "x",
    "d": (),
}
FACTORY = {
    "__annotations__": {"a": "int", "items": "list[int]", "later": "list[int]", "fixed": "int"},
    "items": field(default_factory=list),
    "later": field(default_factory=lambda: [7], init=False),
    "fixed": field(default=3, init=False),
}
FLAGS = {
    "__annotations__": {"a": "int", "hidden": "str", "loose": "float", "unhashed": "int"},
    "hidden": field(default="secret", repr=False),
    "loose": field(default=0.0, compare=False),
    "unhashed": field(default=1, hash=False),
}
KEYWORDS = {
    "__annotations__": {"a": "int", "_": "KW_ONLY", "k": "int", "m": "str"},
    "_": KW_ONLY,
    "m": "m",
}


def _both(body: dict[str, Any], *args: Any, slots: bool = True, **kwargs: Any) -> tuple[Any, Any]:
    by_dataclass, by_record = _pair(body, slots)
    return by_dataclass(*args, **kwargs), by_record(*args, **kwargs)


@pytest.mark.parametrize("slots", [True, False])
@pytest.mark.parametrize(
    ("body", "args", "kwargs"),
    [
        (PLAIN, (1,), {}),
        (PLAIN, (1, 2.5, "y", (1, 2)), {}),
        (FACTORY, (1,), {}),
        (FACTORY, (1, [4]), {}),
        (FLAGS, (1,), {"hidden": "h", "loose": 2.0}),
        (KEYWORDS, (1,), {"k": 2}),
    ],
)
def test_an_object_behaves_as_the_dataclass_one(
    body: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any], slots: bool
) -> None:
    ours, theirs = _both(body, *args, slots=slots, **kwargs)[::-1]
    assert repr(ours) == repr(theirs)
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)
    try:
        assert hash(ours) == hash(theirs)
    except TypeError:  # a list field: unhashable in both
        with pytest.raises(TypeError, match="unhashable"):
            hash(theirs)
    assert [f.name for f in dataclasses.fields(ours)] == [
        f.name for f in dataclasses.fields(theirs)
    ]
    assert type(ours).__match_args__ == type(theirs).__match_args__
    assert str(inspect.signature(type(ours))) == str(inspect.signature(type(theirs)))
    assert dataclasses.is_dataclass(ours)
    assert type(ours).__dataclass_params__.frozen
    same = type(ours)(*args, **kwargs)
    assert same == ours and (same != ours) is False
    assert ours != theirs and (ours == theirs) is False  # another class is never equal
    assert ours.__eq__(theirs) is NotImplemented
    for name in ("a", "nothing"):  # a field, and a name that is none
        with pytest.raises(
            dataclasses.FrozenInstanceError, match=f"cannot assign to field '{name}'"
        ):
            setattr(ours, name, 5)
        with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{name}'"):
            delattr(ours, name)
    # (the dataclass of Python 3.10 and 3.11 raises a TypeError for "nothing" with slots)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
        theirs.a = 5
    assert hasattr(ours, "__dict__") is hasattr(theirs, "__dict__") is (not slots)
    for made in (copy.copy(ours), copy.deepcopy(ours)):
        assert made == ours and repr(made) == repr(ours)


@pytest.mark.parametrize("slots", [True, False])
def test_replace_as_the_dataclass_replaces(slots: bool) -> None:
    theirs, ours = _both(FACTORY, 1, [4], slots=slots)
    for replace in (dataclasses.replace, replaced):
        changed = replace(ours, a=9)
        assert repr(changed) == repr(dataclasses.replace(theirs, a=9))
        assert changed.items is ours.items  # the field is carried, not copied
    with pytest.raises(TypeError):
        replaced(ours, missing=1)
    keyword, keyword_theirs = _both(KEYWORDS, 1, k=2, slots=slots)[::-1]
    assert repr(replaced(keyword, k=5, a=3)) == repr(dataclasses.replace(keyword_theirs, k=5, a=3))


def test_a_factory_makes_a_new_default_each_time() -> None:
    _, by_record = _pair(FACTORY)
    first, second = by_record(1), by_record(2)
    assert first.items == [] and first.items is not second.items
    assert first.later == [7] and first.later is not second.later and first.fixed == 3


def test_equality_and_hash_compare_the_fields_as_a_tuple_does() -> None:
    """A NaN field is equal to itself (the tuple's identity check), as in the dataclass."""
    nan = math.nan
    theirs, ours = _both(PLAIN, 1, nan)
    assert (theirs == dataclasses.replace(theirs)) is (ours == replaced(ours)) is True
    theirs_other, ours_other = _both(PLAIN, 1, float("nan"))
    assert (theirs == theirs_other) is (ours == ours_other) is False
    theirs_flags, ours_flags = _both(FLAGS, 1, loose=1.0)
    assert ours_flags == replaced(ours_flags, loose=2.0)  # compare=False
    assert theirs_flags == dataclasses.replace(theirs_flags, loose=2.0)
    assert hash(ours_flags) == hash(replaced(ours_flags, unhashed=5))  # hash=False
    assert "hidden" not in repr(ours_flags) and repr(ours_flags) == repr(theirs_flags)


def test_wrong_arguments_are_the_dataclass_errors() -> None:
    by_dataclass, by_record = _pair(KEYWORDS)
    for args, kwargs in [((), {}), ((1,), {}), ((1, 2), {}), ((1,), {"k": 1, "x": 2})]:
        with pytest.raises(TypeError) as expected:
            by_dataclass(*args, **kwargs)
        with pytest.raises(TypeError) as raised:
            by_record(*args, **kwargs)
        assert (
            str(raised.value).split("__init__() ")[-1]
            == str(expected.value).split("__init__() ")[-1]
        )


def test_a_field_without_default_after_one_with_is_refused_at_definition() -> None:
    body = {"__annotations__": {"a": "int", "b": "int"}, "a": 1}
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        _pair(body)


def test_an_undocumented_class_gets_the_dataclass_docstring() -> None:
    by_dataclass, by_record = _pair({k: v for k, v in FACTORY.items() if k != "__doc__"})
    assert by_record.__doc__ == by_dataclass.__doc__
    keyword_dataclass, keyword_record = _pair(KEYWORDS)
    assert keyword_record.__doc__ == keyword_dataclass.__doc__


def test_own_methods_are_kept_and_an_own_hash_refused() -> None:
    def __repr__(self: Any) -> str:
        return "mine"

    def __eq__(self: Any, other: object) -> bool:
        return True

    body = {"__annotations__": {"a": "int"}, "__repr__": __repr__, "__eq__": __eq__}
    by_dataclass, by_record = _pair(body)
    for cls in (by_dataclass, by_record):
        assert repr(cls(1)) == "mine" and cls(1) == cls(2)
        assert hash(cls(1)) == hash(cls(1))  # the dataclass's hash over the fields, added
    assert hash(by_record(1)) == hash(by_dataclass(1))

    def __hash__(self: Any) -> int:
        return 1

    body = {"__annotations__": {"a": "int"}, "__hash__": __hash__}
    by_dataclass, by_record = _pair(body)
    assert hash(by_dataclass(5)) == hash(by_record(5)) == 1


@frozen
class Pickled:
    a: int
    b: tuple[int, ...] = ()


@frozen(slots=False)
class PickledLoose:
    a: int
    b: tuple[int, ...] = ()


@pytest.mark.parametrize("cls", [Pickled, PickledLoose])
def test_a_record_pickles(cls: type) -> None:
    made = cls(1, (2, 3))
    assert pickle.loads(pickle.dumps(made)) == made
    assert pickle.loads(pickle.dumps(made, protocol=0)) == made


@pytest.mark.parametrize("body", [PLAIN, FACTORY, FLAGS, KEYWORDS])
def test_the_signature_is_the_dataclass_one_before_any_object_is_made(body: dict[str, Any]) -> None:
    by_dataclass, by_record = _pair(body)
    assert str(inspect.signature(by_record)) == str(inspect.signature(by_dataclass))
    assert "__init__" in vars(by_record)  # the one that compiles the real one


@pytest.mark.parametrize("slots", [True, False])
@pytest.mark.parametrize("eq", [True, False])
@pytest.mark.parametrize(
    ("body", "args", "kwargs"),
    [(PLAIN, (1,), {}), (FACTORY, (1, [4]), {}), (FLAGS, (1,), {"hidden": "h"})],
)
def test_a_mutable_object_behaves_as_the_dataclass_one(
    body: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any], slots: bool, eq: bool
) -> None:
    def make(decorate: Any) -> type:
        namespace = {k: copy.copy(v) for k, v in body.items()}
        namespace.update(__module__=__name__, __qualname__="Case")
        return decorate(type("Case", (), namespace))

    theirs_cls = make(dataclasses.dataclass(slots=slots, eq=eq))
    ours_cls = make(mutable(slots=slots, eq=eq))
    assert str(inspect.signature(ours_cls)) == str(inspect.signature(theirs_cls))
    assert ours_cls.__doc__ == theirs_cls.__doc__
    theirs, ours = theirs_cls(*args, **kwargs), ours_cls(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert (ours_cls.__hash__ is None) is (theirs_cls.__hash__ is None) is eq
    assert (ours == ours_cls(*args, **kwargs)) is (theirs == theirs_cls(*args, **kwargs)) is eq
    assert not ours_cls.__dataclass_params__.frozen and ours_cls.__dataclass_params__.eq is eq
    ours.a = theirs.a = 99  # assignable
    assert repr(ours) == repr(theirs) and repr(replaced(ours, a=5)) == repr(replaced(theirs, a=5))
    assert hasattr(ours, "__dict__") is hasattr(theirs, "__dict__") is (not slots)


def test_a_mutable_dataclass_message_still_initialises_its_base() -> None:
    """Textual's Message initialises itself in ``__post_init__``, which the dataclass's
    ``__init__`` calls: so does a record's."""
    calls: list[str] = []

    class Base:
        def __post_init__(self) -> None:
            calls.append("base")

    made = mutable(type("Sub", (Base,), {"__annotations__": {"a": "int"}, "__module__": __name__}))
    made(1)
    assert calls == ["base"]


def test_gputop_defines_its_dataclasses_as_records() -> None:
    """A plain ``@dataclass`` compiles its methods at import (docs/speed.md, "The first
    frame"): gputop's own are ``@frozen`` or ``@mutable``."""
    from pathlib import Path

    import gputop

    root = Path(gputop.__file__).parent
    plain = [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        if path.name != "records.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.lstrip().startswith(("@dataclass", "@dataclasses.dataclass"))
    ]
    assert plain == []

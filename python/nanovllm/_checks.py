"""Type checks of keyword values: a wrong type is a TypeError naming the keyword."""


def _matches(value, spec):
    if spec is None:
        return value is None
    if isinstance(spec, tuple):
        return any(_matches(value, s) for s in spec)
    if isinstance(spec, list):
        return isinstance(value, (list, tuple)) and all(_matches(v, spec[0]) for v in value)
    if isinstance(spec, dict):
        ((k, v),) = spec.items()
        return isinstance(value, dict) and all(_matches(a, k) and _matches(b, v) for a, b in value.items())
    if spec is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if spec is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, spec)


def _describe(spec):
    if spec is None:
        return "None"
    if isinstance(spec, tuple):
        return " or ".join(_describe(s) for s in spec)
    if isinstance(spec, list):
        inner = spec[0]
        return f"a list of {inner.__name__}" if isinstance(inner, type) else f"a list of ({_describe(inner)})"
    if isinstance(spec, dict):
        ((k, v),) = spec.items()
        return f"a dict of {_describe(k)} to {_describe(v)}"
    return {float: "a number", int: "an int", bool: "a bool", str: "a str"}.get(spec, spec.__name__)


def check_type(name, value, spec):
    if not _matches(value, spec):
        raise TypeError(f"{name} must be {_describe(spec)} (got {value!r})")

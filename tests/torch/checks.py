# Tensor comparison and error-message checks shared by the torch_collectives tests:
# diff() names the first differing element (index, got, expected); expect_error() checks
# that a call raises RuntimeError (or the types given) whose message names what it must
# (op, dtype, ...).
import re

import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64]

# How a message may name a dtype: torch's name ("float32"), c10's ("Float"), short forms.
_DTYPE_NAMES = {
    torch.float32: ["float32", "Float", "float", "fp32"],
    torch.float64: ["float64", "Double", "double", "fp64"],
    torch.float16: ["float16", "Half", "half", "fp16"],
    torch.bfloat16: ["bfloat16", "BFloat16", "bf16"],
    torch.int8: ["int8", "Char"],
    torch.int16: ["int16", "Short"],
    torch.int32: ["int32", "Int"],
    torch.int64: ["int64", "Long"],
    torch.uint8: ["uint8", "Byte"],
    torch.bool: ["bool", "Bool", "boolean"],
    torch.complex64: ["complex64", "ComplexFloat", "cfloat"],
}


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def dtype_pattern(dtype):
    """Regex matching the dtype's name as a whole word (so "float" is not in "float64")."""
    names = "|".join(re.escape(n) for n in _DTYPE_NAMES[dtype])
    return rf"(?<![A-Za-z0-9_])({names})(?![A-Za-z0-9_])"


def op_pattern(op_name):
    """Regex for a ReduceOp's name: MAX, ReduceOp.MAX, max, PRODUCT/prod, PREMUL_SUM..."""
    alias = {"PRODUCT": "PRODUCT|PROD", "PREMUL_SUM": "PREMUL_?SUM|PreMulSum"}
    return rf"(?i)(?<![A-Za-z0-9])({alias.get(op_name, op_name)})(?![A-Za-z0-9])"


def _flat(t):
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    t = t.contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)  # a bool byte other than 0/1 is a bug too
    return t


def _value(t, flat_index, complex_):
    if complex_:
        pair = t[2 * flat_index: 2 * flat_index + 2].tolist()
        return complex(pair[0], pair[1])
    return t[flat_index].item()


def diff(got, expected, rtol=0.0, atol=0.0):
    """None if equal (within rtol/atol for floating types), else what differs first."""
    if not isinstance(got, torch.Tensor):
        return f"got a {type(got).__name__}, expected a tensor"
    if got.shape != expected.shape:
        return f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if got.dtype != expected.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    g, e = _flat(got), _flat(expected)
    if (rtol or atol) and g.is_floating_point():
        bad = ~torch.isclose(g.double(), e.double(), rtol=rtol, atol=atol)
    else:
        bad = g != e
    if not bool(bad.any()):
        return None
    cplx = got.is_complex()
    idx = bad.nonzero()[0].item()
    elem = idx // 2 if cplx else idx
    nbad = int(bad.reshape(-1, 2).any(1).sum()) if cplx else int(bad.sum())
    where = _unravel(elem, tuple(got.shape))
    tol = f" (rtol {rtol}, atol {atol})" if rtol or atol else ""
    return (f"{nbad} of {got.numel()} {dtype_name(got.dtype)} elements differ{tol}; first at "
            f"index {where}: got {_value(g, elem, cplx)}, expected {_value(e, elem, cplx)}")


def _unravel(i, shape):
    if len(shape) <= 1:
        return i
    out = []
    for d in reversed(shape):
        out.append(i % d)
        i //= d
    return tuple(reversed(out))


def expect_error(ctx, what, fn, patterns, types=(RuntimeError,)):
    """fn() must raise one of `types` (RuntimeError) whose message matches every regex
    in `patterns` (a dict description -> regex). Returns the message (or None if
    nothing raised)."""
    names = " or ".join(t.__name__ for t in types)
    try:
        fn()
    except types as e:
        check_message(ctx, what, str(e), patterns)
        return str(e)
    except Exception as e:  # noqa: BLE001  (the wrong type is the failure)
        ctx.fail(f"{what}: raised {type(e).__name__}, expected {names}: {e}")
        return str(e)
    ctx.fail(f"{what}: did not raise (expected {names})")
    return None


def check_message(ctx, what, msg, patterns):
    missing = [d for d, rx in patterns.items() if not re.search(rx, msg)]
    if missing:
        ctx.fail(f"{what}: the RuntimeError does not name {', '.join(missing)}: {msg!r}")


def tol_for(dtype, ulps=2):
    """Relative tolerance of a few rounding steps in dtype (0 for exact types)."""
    if dtype.is_floating_point or dtype.is_complex:
        base = torch.float32 if dtype == torch.complex64 else dtype
        return ulps * torch.finfo(base).eps
    return 0.0

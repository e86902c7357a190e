"""Normalized error signatures: the same failure gives the same string across tests.

A signature is `<error class>: <first message line, normalized>[ @ <frame> < <frame>]`:
numbers, hex addresses, file paths and quoted value names are stripped from the message, so two
crashes that differ only in shapes or temp files bucket together; the top (innermost) frames of
the library that failed (up to our own code's call into it), as `file-stem.function`, separate
different failures that happen to share a generic message.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"\b0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"(/[\w.\-+]+)+"), "<path>"),
    (re.compile(r"%?\b[A-Za-z_]*\d+[A-Za-z_\d]*\b"), lambda m: re.sub(r"\d+", "N", m.group())),
    (re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
]

#: frames kept in a signature
TOP_FRAMES = 2

#: a Python traceback line (`File "p", line 3, in f`) or a faulthandler dump line
#: (`File "p", line 3 in f`)
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+,? in (?P<func>.+)$', re.M)
#: our own sources: frames there say where we called the library, not where it failed. Only
#: our packages' folders count: a virtual environment inside the checkout (CI's
#: `.ci/venv-torch2141`) holds the library's frames, not ours.
_REPO = Path(__file__).resolve().parents[1]
_OWN_SOURCES = tuple(f"{_REPO / name}/" for name in ("campaign", "ir", "mutators", "tests", "bench")
                     ) + (str(_REPO / "run.py"),)
#: generic glue frames (call wrappers, FFI trampolines) that say nothing about the failure
_SKIP = re.compile(r"(^|/)(threading|multiprocessing/\w+|contextlib|functools)\.py$|\.pxi$|"
                   r"(^|/)tvm_ffi/|(^|/)tvm/_ffi/")


def _func_name(func: str) -> str:
    """`void tvm::runtime::vm::CheckTensorInfo(tvm::ffi::PackedArgs, ...)` -> `vm::CheckTensorInfo`;
    a Python function name stays as it is."""
    func = func.strip()
    if re.fullmatch(r"[\w.<>]+", func):  # a Python frame
        return func
    depth, cut = 0, len(func)
    for i, ch in enumerate(func):  # drop the argument list (C++ frames)
        if ch == "(" and depth == 0 and i > 0:
            cut = i
            break
        depth += ch == "<"
        depth -= ch == ">"
    words = re.sub(r"<[^<>]*>", "", func[:cut]).split()
    name = words[-1] if words else func
    return "::".join(name.split("::")[-2:])


#: a generated module's name (Inductor's output code: `c23sjyha6voh...`)
_GENERATED = re.compile(r"\b(?=\w*\d)[a-z0-9]{24,}\b")


def _label(path: str, func: str) -> str:
    """`file-stem.function`; a generated module's stem (Inductor's output code, named by a
    hash of its source) is `<gen>`: the same crash in another compile is the same frame."""
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return f"{'<gen>' if _GENERATED.fullmatch(stem) else stem}.{_func_name(func)}"


def python_frames(text: str, innermost_first: bool = False) -> list[str]:
    """The library frames (`file-stem.function`) of a Python traceback or faulthandler dump,
    innermost first, down to the first frame of our own code (the call into the library);
    glue frames are skipped. Python tracebacks list the innermost frame last; faulthandler
    dumps list it first (`innermost_first=True`). With chained exceptions, the last one
    printed (the one raised) counts."""
    if not innermost_first:
        text = (text or "").rsplit("\nThe above exception", 1)[-1]
    found = [(m.group("path"), m.group("func")) for m in _FRAME.finditer(text or "")]
    if not innermost_first:
        found.reverse()
    out = []
    for path, func in found:
        if path.startswith(_OWN_SOURCES):
            break
        if not _SKIP.search(path):
            out.append(_label(path, func))
    return out


#: a signature's length limit (`normalize`: the message is cut at 60 less when frames follow)
MAX_LEN = 300


#: Dynamo's report of an exception raised inside an op it ran on fake tensors: under the
#: wrapper's first line (`RuntimeError when making fake tensor call`), which alone names no
#: cause, `Explanation: Dynamo failed to run FX node with fake tensors: call_function ...`,
#: whose arguments may span lines, ends `...): got AssertionError('outs_to_grad length (2) !=
#: tangents length (3)')`
_FAKE_CALL = "Explanation: Dynamo failed to run FX node with fake tensors"
#: the wrapper's head, as `first_line` leaves it before what the fake run got
_FAKE_CALL_HEAD = "RuntimeError when making fake tensor call: "
_GOT = re.compile(r"\): got (?P<cls>[A-Z]\w*)\((?P<q>['\"])(?P<msg>.*?)(?P=q)\)\s*$", re.M)


def first_line(message: str) -> str:
    """The message's first line, with the exception Dynamo's fake-tensor run got appended
    (`RuntimeError when making fake tensor call: AssertionError: outs_to_grad length ...`):
    two causes behind that one wrapper are two signatures."""
    text = message.strip().splitlines()[0] if message.strip() else ""
    at = message.find(_FAKE_CALL)
    got = _GOT.search(message, at) if at >= 0 else None
    if got is not None:
        inner = got.group("msg").encode().decode("unicode_escape", "replace").splitlines()
        text = f"{text}: {got.group('cls')}: {inner[0] if inner else ''}".rstrip(": ")
    return text


def normalize(error_class: str, message: str, max_len: int = MAX_LEN,
              frames: Sequence[str] = ()) -> str:
    text = first_line(message)
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    sig = f"{error_class}: {text.strip()}"
    top = list(dict.fromkeys(frames))[:TOP_FRAMES]
    if top:
        sig = f"{sig[:max_len - 60]} @ {' < '.join(top)}"
    return sig[:max_len]



#: a quoted string ('...' or "...")
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
#: a dotted name (`R.add`, `relax.nn.relu`, `prims.copy_to.default`) or a `%value` name
_NAME = re.compile(r"%[\w.]+|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
#: characters of a cause signature's message kept (`normalize` cuts long signatures at a
#: length limit, so what follows differs between buckets of one message)
CAUSE_MESSAGE_CHARS = 100


def _unquote(m: re.Match[str]) -> str:
    """A quoted bare identifier (`'TupleType'`, `'dtype'`) stays; any other quoted text (an
    op or value name, a path) becomes `'…'`."""
    inner = m.group()[1:-1]
    return m.group() if re.fullmatch(r"[A-Za-z_]\w*", inner) else "'…'"


def _collapse(text: str, open_: str, close: str) -> str:
    """What each bracketed part holds, innermost first, to `…`; an unclosed bracket (a
    signature cut by its length limit) runs to the end."""
    inner = re.compile(re.escape(open_) + "[^" + re.escape(open_ + close) + "]*"
                       + re.escape(close))
    while True:
        text, n = inner.subn("\0", text)
        if not n:
            break
    cut = text.find(open_)
    if cut != -1:
        text = text[:cut] + "\0"
    return text.replace("\0", f"{open_}…{close}")


#: an exception class opening a message: the exception a wrapper wraps, its message after it
#: (`LoweringException: KeyError: ...`, `torch._dynamo.exc.BackendCompilerFailed: ...`)
_WRAPPED = re.compile(r"(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Failed|Interrupt))\s*: ")


def innermost(head: str) -> tuple[str, str]:
    """(exception class, message) of the innermost exception a signature's head
    (`<class>: <message>`, no frames) names: wrapper exceptions put the class of the one they
    wrap at the head of their message, one layer each (`InductorError: LoweringException:
    LoweringException: KeyError: 'unbacked_bindings'` -> `('KeyError', "'unbacked_bindings'")`),
    and how many layers there are depends on how deep the failing code was nested, not on
    the cause. A head without `: ` is all class."""
    cls, sep, message = head.partition(": ")
    if not sep:
        return head, ""
    if message.startswith(_FAKE_CALL_HEAD) and (m := _WRAPPED.match(
            message[len(_FAKE_CALL_HEAD):])) is not None:  # what Dynamo's fake run got
        cls, message = m.group(1), message[len(_FAKE_CALL_HEAD) + m.end():]
    while (m := _WRAPPED.match(message)) is not None:
        cls, message = m.group(1), message[m.end():]
    return cls, message


#: exception classes one check raises in one release and another in the next, its message
#: unchanged: `torch._check` (RuntimeError) and its kin `_check_not_implemented`, `_check_type`,
#: `_check_value`, `_check_index` (C++'s `TORCH_CHECK_*` alike). torch moves checks between
#: them: 2.14 made the Subtraction of two bool tensors a `_check_not_implemented` (F08's and
#: F56's RuntimeError on 2.13 is a NotImplementedError on 2.14.1 and 2.15), 2.15 made `imag`'s
#: and `isposinf`'s complex checks `_check_type`s
CHECK_ERRORS = ("RuntimeError", "NotImplementedError", "TypeError", "ValueError", "IndexError")
#: how `release_neutral` writes any of `CHECK_ERRORS`
CHECK_ERROR = "<check>"
#: one of `CHECK_ERRORS` naming an exception (followed by `: `): the head's class, a wrapped
#: exception's, or the exception Dynamo's fake-tensor run got
_CHECK_CLASS = re.compile(r"(?<![\w.])(?:" + "|".join(CHECK_ERRORS) + r")(?=\s*: )")


def release_neutral(sig: str | None) -> str:
    """Signature `sig` (`normalize`'s, or `cause_signature`'s) up to what varies between
    releases of one compiler for the same failure: every exception class of its head that is
    one of `CHECK_ERRORS` (a name of one followed by `: `: the head's own, each wrapped one's,
    the one Dynamo's fake-tensor run got) is `CHECK_ERROR`. The rest of the message and the
    frames stay: two signatures equal so are one failure raised as the release at
    hand raises it (`NotImplementedError: Subtraction ...` on torch 2.14.1 is
    `RuntimeError: Subtraction ...` on 2.13). For matching only (the bucket keys keep the
    class they saw: their ids must not move)."""
    head, sep, frames = (sig or "").strip().partition(" @ ")
    return _CHECK_CLASS.sub(CHECK_ERROR, head) + sep + frames


def cause_signature(error_sig: str | None) -> str:
    """A bucket signature (`normalize`'s) normalized further, for grouping buckets by cause:
    `<error class>: <message head> @ <throwing site>`, of the innermost exception.

    Beyond `normalize`: the wrapper exceptions named at the head of the message are dropped,
    however many (`innermost`: `InductorError: LoweringException: KeyError: ...` is
    `KeyError: ...`; the bucket's `error_sig` keeps them, for display); quoted text that is
    not one bare identifier (op names like `'prims.copy_to.default'`) becomes `'…'`
    (`'TupleType'`, `'dtype'` stay: they name the failure); what parentheses and brackets hold
    (argument lists, tuples, shapes) becomes `(…)`/`[…]`; dotted names (`R.add`,
    `relax.nn.relu`) and `%value` names become `<name>`; the message is cut to its first
    `CAUSE_MESSAGE_CHARS` characters. Of the frames only the innermost stays, the throwing
    site, with its numbers as `N` (`_impl_v13` -> `_impl_vN`) and a generated module's name
    as `<gen>`. The innermost exception's type stays as it is."""
    sig = (error_sig or "").strip()
    if not sig:
        return ""
    head, _, frames = sig.partition(" @ ")
    cls, message = innermost(head)
    if len(head) >= (MAX_LEN - 60 if frames else MAX_LEN):  # `normalize` cut it: a part word
        message = message.rsplit(" ", 1)[0]
    message = _QUOTED.sub(_unquote, message)
    message = _collapse(_collapse(message, "(", ")"), "[", "]")
    message = _NAME.sub("<name>", message)
    message = re.sub(r"\s+", " ", message).strip()[:CAUSE_MESSAGE_CHARS].rstrip()
    site = _GENERATED.sub("<gen>", frames.split(" < ", 1)[0].strip())
    site = re.sub(r"\d+", "N", site)
    out = f"{cls}: {message}" if message else cls
    return f"{out} @ {site}" if site else out

"""Seeds from models: what `mutation.seeds` names (docs/mutation.md, "Seeds from models").

An entry of `mutation.seeds` (one string, or a list of them) is one of:
  - a folder: its `*.gir` files, as before (`corpus/<stem>`), each with its `<stem>.npz` of
    param values beside it when there is one, and its model when the file starts with a
    `# model: <name> insts <a>-<b>` comment (a window of a model, `ir.importers.windows`);
  - a `.gir` file: that file alone;
  - an `.onnx` file: the model imported (`ir.importers.onnx_model.import_onnx`) and cut into
    windows (`ir.importers.windows.cut_windows`);
  - `<library>:<model>` with library `torchvision`, `timm` or `transformers` (the `[models]`
    extra): the model built with random weights, never downloaded, in a small configuration,
    imported through torch.export (`ir.importers.torch_export.import_torch`) and cut;
  - `<package.module>:<function>`: a factory returning `(module, example_inputs)`, imported
    and cut the same way.
A bad entry is a `SeedError` of one line naming it (campaign/config.py makes it a config error,
exit 2). Everything is plain data on the way in: a seed's values come from `.npz` files read
with `allow_pickle=False`.
"""
from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ir.core.graph import Graph
from mutators.seed_files import ROOT, SeedError, check_seed

#: the model libraries `<library>:<model>` may name (the `[models]` extra)
LIBRARIES = ("torchvision", "timm", "transformers")
_FACTORY = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*\Z")


@dataclass
class Seed:
    """One seed graph: its pool id, the model it is a window of ("" for a hand-written one)
    and the values of its params that came with it (the model's own; empty: drawn afresh)."""

    seed_id: str
    graph: Graph
    model: str = ""
    weights: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class WindowOptions:
    """How a model is cut into seeds (`mutation.windows`, `mutation.window_min`,
    `mutation.window_max`)."""

    count: int = 8
    k_min: int = 5
    k_max: int = 30
    #: no window holds a value but params of more elements (tests stay the size of generated
    #: ones)
    max_elems: int = 1 << 16
    #: nor params of more elements in all (a test's weights are drawn, stored with a finding)
    max_param_elems: int = 1 << 20


def options_of(cfg: Any) -> WindowOptions:
    """The window options of a `MutationConfig`."""
    return WindowOptions(cfg.windows, cfg.window_min, cfg.window_max)


def entries(seeds: Any) -> list[str]:
    """The entries of `mutation.seeds`: None or "" none, a string one, a list its strings."""
    if seeds is None or seeds == "":
        return []
    if isinstance(seeds, str):
        return [seeds]
    if isinstance(seeds, Sequence):
        return [str(s) for s in seeds if s is not None and str(s) != ""]
    raise SeedError(f"mutation.seeds: expected a string or a list of strings, got {seeds!r}")


def kind(entry: str) -> str:
    """`dir`, `gir`, `onnx`, `library` or `factory` (see the module doc)."""
    head, sep, _ = entry.partition(":")
    if sep and head in LIBRARIES:
        return "library"
    if entry.endswith(".onnx"):
        return "onnx"
    if entry.endswith(".gir"):
        return "gir"
    if _FACTORY.match(entry) and not _path(entry, must_exist=False).exists():
        return "factory"
    return "dir"


def _path(entry: str, must_exist: bool = True) -> Path:
    """A path entry: absolute, else relative to the working directory, else to the checkout."""
    p = Path(entry)
    for cand in ([p] if p.is_absolute() else [p, ROOT / p]):
        if cand.exists():
            return cand
    if must_exist:
        raise SeedError(f"{entry}: no such file or directory (relative paths are looked up "
                        f"in the working directory and in {ROOT})")
    return p


def read_seed_file(f: Path, sid: str) -> Seed:
    """A `.gir` seed (`check_seed`: SeedError on a bad one), its model (its leading
    `# model:` comment) and the values of its `.npz` beside it."""
    from ir.importers.windows import read_lineage

    g = check_seed(f)
    lin = read_lineage(f.read_text(encoding="utf-8"))
    weights: dict[str, np.ndarray] = {}
    npz = f.with_suffix(".npz")
    if npz.exists():
        try:
            with np.load(npz, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except Exception as e:
            raise SeedError(f"{npz}:1: not an .npz of arrays: {_one_line(e)}") from None
        types = {p.name: p.type for p in g.params}
        for k, a in arrays.items():
            t = types.get(k)
            if t is None or tuple(a.shape) != tuple(t.shape) or a.dtype != t.dtype.numpy:
                raise SeedError(f"{npz}:1: array {k!r} ({a.dtype}{list(a.shape)}) is no param "
                                f"of {f.name} of that type")
            weights[k] = a
    return Seed(sid, g, lin[0] if lin else "", weights)


def _one_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def gir_seeds(entry: str, skip_bad: bool = False,
              bad: list[tuple[Path, SeedError]] | None = None) -> list[Seed]:
    """The seeds of a folder or `.gir` entry; a bad file raises SeedError, or with `skip_bad`
    is left out (and appended to `bad`)."""
    p = _path(entry)
    if p.is_dir():
        files = sorted(p.glob("*.gir"))
    elif p.suffix == ".gir":
        files = [p]
    else:
        raise SeedError(f"{entry}: neither a folder nor a .gir or .onnx file")
    out = []
    for f in files:
        try:
            out.append(read_seed_file(f, f"corpus/{f.stem}"))
        except SeedError as e:
            if bad is not None:
                bad.append((f, e))
            if not skip_bad:
                raise
    return out


# ---- models ------------------------------------------------------------------------------------


def torchvision_module() -> Any:
    """`torchvision`, imported even where its C++ ops do not load (a CUDA build beside a CPU
    torch): the two ops its fake registrations need are declared first, so the models, which
    do not use them, work."""
    try:
        import torchvision
        return torchvision
    except RuntimeError as e:
        if "torchvision::nms" not in str(e):
            raise
    import sys

    import torch

    for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[mod]
    lib = torch.library.Library("torchvision", "FRAGMENT")
    for op in ("nms", "qnms"):
        try:
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:
            pass
    _KEEP.append(lib)
    import torchvision
    return torchvision


_KEEP: list[Any] = []


def _image(size: int = 64, batch: int = 1) -> tuple[Any, ...]:
    import torch

    return (torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0)),)


#: torchvision models' inputs and constructor arguments where the defaults are too big or do
#: not fit (ViT and Swin take the image size they were built for)
_TV_KWARGS: dict[str, dict[str, Any]] = {
    "vit_b_16": {"image_size": 32}, "vit_b_32": {"image_size": 32},
    "vit_l_16": {"image_size": 32}, "vit_l_32": {"image_size": 32}, "vit_h_14": {"image_size": 28},
}
_TV_SIZE: dict[str, int] = {"vit_b_16": 32, "vit_b_32": 32, "vit_l_16": 32, "vit_l_32": 32,
                            "vit_h_14": 28, "inception_v3": 96, "googlenet": 64,
                            **{f"vgg{n}{bn}": 32 for n in (11, 13, 16, 19) for bn in ("", "_bn")}}


def _torchvision(name: str) -> tuple[Any, tuple[Any, ...]]:
    tv = torchvision_module()
    known = set(tv.models.list_models())
    if name not in known:
        raise SeedError(f"torchvision has no model {name!r} (torchvision.models.list_models())")
    kwargs = dict(_TV_KWARGS.get(name, {}))
    if name in ("inception_v3", "googlenet"):
        kwargs["aux_logits"] = False
        kwargs["init_weights"] = False
    m = tv.models.get_model(name, weights=None, **kwargs)
    return m, _image(_TV_SIZE.get(name, 64))


#: timm families in a small configuration (timm's constructors take the sizes as keywords):
#: name fragment -> keywords, input image size
_TIMM_SMALL: list[tuple[str, dict[str, Any], int]] = [
    ("swin", dict(img_size=32, embed_dim=32, depths=(2, 2), num_heads=(1, 2), window_size=4), 32),
    ("vit", dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2), 32),
    ("deit", dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2), 32),
]


def _timm(name: str) -> tuple[Any, tuple[Any, ...]]:
    import timm

    if not timm.is_model(name):
        raise SeedError(f"timm has no model {name!r} (timm.list_models())")
    for frag, kwargs, size in _TIMM_SMALL:
        if frag in name:
            try:
                return timm.create_model(name, pretrained=False, num_classes=10,
                                         **kwargs), _image(size)
            except TypeError:  # this model does not take those sizes: its own, at 64x64
                break
    return timm.create_model(name, pretrained=False, num_classes=10), _image(64)


def _small_transformers() -> dict[str, Callable[[], Any]]:
    """Small configurations of transformers' models (random weights; a few layers, narrow)."""
    import transformers as tr

    common: dict[str, Any] = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, vocab_size=128, max_position_embeddings=64)
    return {
        "bert": lambda: tr.BertModel(tr.BertConfig(**common)),
        "gpt2": lambda: tr.GPT2Model(tr.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_inner=64,
                                                   vocab_size=128, n_positions=64)),
        "llama": lambda: tr.LlamaModel(tr.LlamaConfig(**common, num_key_value_heads=2)),
        "mistral": lambda: tr.MistralModel(tr.MistralConfig(**common, num_key_value_heads=1)),
        "qwen2": lambda: tr.Qwen2Model(tr.Qwen2Config(**common, num_key_value_heads=1)),
        "mixtral": lambda: tr.MixtralModel(tr.MixtralConfig(**common, num_key_value_heads=2,
                                                            num_local_experts=4,
                                                            num_experts_per_tok=2)),
        "t5": lambda: tr.T5EncoderModel(tr.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                                    num_heads=2, vocab_size=128)),
        "vit": lambda: tr.ViTModel(tr.ViTConfig(hidden_size=32, num_hidden_layers=2,
                                                num_attention_heads=2, intermediate_size=64,
                                                image_size=32, patch_size=8)),
    }


def _transformers(name: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    table = _small_transformers()
    if name not in table:
        raise SeedError(f"transformers: no small configuration for {name!r} (known: "
                        f"{', '.join(sorted(table))})")
    m = table[name]()
    m.config.use_cache = False
    if name == "vit":
        return m, _image(32)
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(0))
    return m, (ids,)


def _factory(entry: str) -> tuple[Any, tuple[Any, ...]]:
    mod_name, _, fn_name = entry.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:
        raise SeedError(f"cannot import {mod_name}: {_one_line(e)}") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise SeedError(f"{mod_name} has no function {fn_name!r}")
    try:
        got = fn()
    except Exception as e:
        raise SeedError(f"the factory raised {_one_line(e)}") from None
    if not (isinstance(got, tuple) and len(got) == 2):
        raise SeedError(f"the factory returned {type(got).__name__}, not (module, "
                        f"example_inputs)")
    module, inputs = got
    return module, tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)


def build_model(entry: str) -> tuple[Any, tuple[Any, ...]]:
    """(module in eval mode, example inputs) of a `library` or `factory` entry; SeedError (the
    problem, without the entry) when it cannot be built."""
    head, _, name = entry.partition(":")
    builders = {"torchvision": _torchvision, "timm": _timm, "transformers": _transformers}
    if head in builders:
        try:
            torchvision_module()  # timm and transformers import it too
        except ImportError:
            pass
        try:
            importlib.import_module(head)
        except ImportError:
            raise SeedError(f"{head} is not installed (pip install 'dynsmith[models]')") from None
        try:
            module, inputs = builders[head](name)
        except SeedError:
            raise
        except Exception as e:
            raise SeedError(f"cannot build the model: {_one_line(e)}") from None
    else:
        module, inputs = _factory(entry)
    return out_of_place(module.eval()), inputs


def out_of_place(module: Any) -> Any:
    """`module` with its layers' in-place switches off (`nn.ReLU(inplace=True)` and the like
    compute the same out of place): the exported graph then holds `relu`, not `relu_` on a
    value other ops read."""
    for m in module.modules():
        if isinstance(getattr(m, "inplace", None), bool):
            m.inplace = False
    return module


def model_name(entry: str) -> str:
    """The name a model's windows carry: `resnet18` for `torchvision:resnet18`, the file's stem
    for an `.onnx` file, the function for a factory."""
    if kind(entry) == "onnx":
        return Path(entry).stem
    return re.sub(r"[^\w.-]", "_", entry.rpartition(":")[2])


def import_model(entry: str) -> Any:
    """The `ImportResult` of an `onnx`, `library` or `factory` entry (SeedError: the problem)."""
    name = model_name(entry)
    if kind(entry) == "onnx":
        import onnx

        p = _path(entry)
        try:
            model = onnx.load(str(p))
            onnx.checker.check_model(model)
        except Exception as e:
            raise SeedError(f"not an ONNX model: {_one_line(e)}") from None
        from ir.importers.onnx_model import import_onnx

        try:
            return import_onnx(model, name, keep_windows=True)
        except Exception as e:
            raise SeedError(f"cannot import it: {_one_line(e)}") from None
    import torch

    module, inputs = build_model(entry)
    from ir.importers.torch_export import import_torch

    try:
        with torch.no_grad():
            return import_torch(module, inputs, name, keep_windows=True)
    except Exception as e:
        raise SeedError(f"cannot import it: {_one_line(e)}") from None


def model_windows(result: Any, name: str, opts: WindowOptions, seed: int = 0) -> list[Any]:
    """Windows of an `ImportResult`: of the whole graph, else of each part the importer
    mapped (`ImportResult.windows`, parts numbered from 0), `opts.count` in all at most."""
    from ir.importers.windows import cut_windows

    kw = dict(k_min=opts.k_min, k_max=opts.k_max, seed=seed, max_elems=opts.max_elems,
              max_param_elems=opts.max_param_elems, params=result.params)
    if result.graph is not None:
        return cut_windows(result.graph, name, count=opts.count, **kw)
    out: list[Any] = []
    for i, part in enumerate(result.windows):
        if len(out) >= opts.count:
            break
        if part.num_insts() < opts.k_min:
            continue
        out += cut_windows(part, name, count=opts.count - len(out), part=i, **kw)
    return out


@functools.lru_cache(maxsize=64)
def _model_seeds(entry: str, opts: WindowOptions) -> tuple[Seed, ...]:
    name = model_name(entry)
    result = import_model(entry)
    windows = model_windows(result, name, opts)
    if not windows:
        share = f"{result.mapped_share:.0%} of its op instances mapped"
        raise SeedError(f"no window of {opts.k_min}-{opts.k_max} instructions with valid inputs "
                        f"({share})")
    return tuple(Seed(f"model/{name}/{w.first}-{w.last}" if w.part is None
                      else f"model/{name}/p{w.part}/{w.first}-{w.last}",
                      w.graph, name, w.weights(result.params)) for w in windows)


def entry_problem(seeds: Any) -> str:
    """What is wrong with `mutation.seeds` short of reading it: not a string or list, or a
    path entry naming nothing. One line (`mutation.seeds: ...`), "" when nothing is."""
    try:
        for entry in entries(seeds):
            k = kind(entry)
            if k in ("dir", "gir", "onnx"):
                p = _path(entry)
                if k == "dir" and not p.is_dir():
                    raise SeedError(f"{entry}: neither a folder nor a .gir or .onnx file")
    except SeedError as e:
        return str(e) if str(e).startswith("mutation.seeds:") else f"mutation.seeds: {e}"
    return ""


def load_entry(entry: str, opts: WindowOptions = WindowOptions(), skip_bad: bool = False,
               bad: list[tuple[Path, SeedError]] | None = None) -> list[Seed]:
    """The seeds of one entry. A bad entry raises SeedError of one line naming it
    (`<entry>: <problem>`; a bad `.gir` file: `<file>:<line>: problem`, as `check_seed`
    says)."""
    k = kind(entry)
    if k in ("dir", "gir"):
        return gir_seeds(entry, skip_bad, bad)
    if k == "onnx":
        _path(entry)  # no such file: its own message
    try:
        return [replace(s) for s in _model_seeds(entry, opts)]
    except SeedError as e:
        raise SeedError(f"{entry}: {e}") from None


def load_all(seeds: Any, opts: WindowOptions = WindowOptions(), skip_bad: bool = False,
             bad: list[tuple[Path, SeedError]] | None = None) -> list[Seed]:
    """Every entry's seeds, in entry order; seed ids made unique. A bad entry or file raises
    SeedError, or with `skip_bad` is left out (and appended to `bad`, a model entry as its
    path)."""
    out: list[Seed] = []
    ids: set[str] = set()
    for entry in entries(seeds):
        try:
            got = load_entry(entry, opts, skip_bad, bad)
        except SeedError as e:
            if not skip_bad or kind(entry) in ("dir", "gir"):
                raise
            if bad is not None:
                bad.append((Path(entry), e))
            continue
        for s in got:
            sid, n = s.seed_id, 1
            while sid in ids:
                n += 1
                sid = f"{s.seed_id}~{n}"
            ids.add(sid)
            s.seed_id = sid
            out.append(s)
    return out

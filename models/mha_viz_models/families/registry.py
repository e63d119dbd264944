"""The family registry: what a family of attention modules is (`Family`), the registry itself
(`FAMILIES`, `register`) and what is asked of it (which module is which family, where its W_O and
values are, whether our MHA can stand in, the lists of supported models). The families themselves
are registered in `mha_viz_models.families.builtin`, which every caller imports (it re-exports these names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from mha_viz_models.attention.heads import ValuePath
from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.families.adapters import Adapter


@dataclass(frozen=True)
class Family:
    """One kind of self-attention module mha-viz can read and replace.

    recognise(module): whether `module` is one (by structure, not by class name).
    build(module, config, causal): our adapter over its weights.
    output_projection(module): the layer that applies W_O (its input is the heads' outputs z side by side).
    refuse(module, config): the features of this module or config our MHA does not compute
        (a model with any is refused when its attention is to be replaced; with Hugging Face's
        attention, every per-head feature that reads z still works).
    names, kind: the models it covers as people know them, and whether they are encoders, decoders or
        encoder–decoders: every list of supported models (messages, docs/using.md, docs/architecture.md)
        is made from these (`supported_models`, `family_table`).
    values(module, config): where the module's values come out (`mha_viz_models.attention.heads.ValuePath`), for
        the families whose values are read off the model's own modules rather than our adapter's
        (those our MHA may not stand in for); None where they are not read that way.
    unread: why the heads' outputs of a family are not read at all (DeepSeek-V4), or "".
    """

    tag: str
    recognise: Callable[[nn.Module], bool]
    build: Callable[[nn.Module, Any, bool], Adapter]
    output_projection: Callable[[nn.Module], nn.Module]
    refuse: Callable[[nn.Module, Any], list[str]] = lambda _module, _config: []
    values: Callable[[nn.Module, Any], ValuePath | None] = lambda _module, _config: None
    # the models people know it by, and what they are (the lists in messages and docs come from these)
    names: str = ""
    kind: str = "decoder"  # "encoder", "decoder" or "encoder–decoder"
    # why its heads' outputs z are not read, where they are not (every head's attention still is); "" where they are
    unread: str = ""


FAMILIES: dict[str, Family] = {}  # by tag, in order of precedence: the first that recognises a module wins


def register(family: Family) -> Family:
    """Add a family to `FAMILIES` (after those registered before it)."""
    FAMILIES[family.tag] = family
    return family


def refused(module: nn.Module, _config, _causal) -> Adapter:
    """The builder of a family our MHA does not compute (its `refuse` names why)."""
    raise UnsupportedArchitecture(f"Our MHA cannot compute {type(module).__name__}.")


KINDS = ("encoder", "decoder", "encoder–decoder")


def supported_models() -> str:
    """The models mha-viz knows, as people know them, by kind, from `FAMILIES` (every message that
    lists them uses this)."""
    by_kind = {kind: [n for fam in FAMILIES.values() if fam.kind == kind and fam.names
                      for n in fam.names.split(", ")] for kind in KINDS}
    return "; ".join(f"{kind}s ({', '.join(names)})" for kind, names in by_kind.items() if names)


def family_table() -> str:
    """The Markdown table of every family (docs/using.md and docs/architecture.md hold it, between
    `<!-- families -->` markers; a test checks that they do)."""
    rows = ["| family | models | kind | heads' outputs z, W_O and values: every per-head feature | our MHA stands in |",
            "|---|---|---|---|---|"]
    for tag, fam in FAMILIES.items():
        if not fam.names:
            continue
        heads = ("not yet: encoder, decoder and cross-attention are shown" if fam.kind == "encoder–decoder"
                 else "no: every head's attention is shown" if fam.unread else "yes, checked at load")
        ours = ("no: refused, naming the feature" if fam.build is refused
                else "yes, checked at load (a relative with a feature it lacks is refused, naming it)")
        rows.append(f"| `{tag}` | {fam.names} | {fam.kind} | {heads} | {ours} |")
    return "\n".join(rows)


def family_of(module: nn.Module) -> str | None:
    """The tag of the first family in `FAMILIES` that recognises `module`, or None."""
    return next((tag for tag, fam in FAMILIES.items() if fam.recognise(module)), None)


def find_attention(model: nn.Module) -> list[tuple[nn.Module, str, nn.Module, str]]:
    """Every self-attention module of `model` in the order the model runs them (layer 0 first),
    as (parent, attribute name, module, family tag). Raises UnsupportedArchitecture when nothing
    is recognised; whether our MHA can stand in for them is `stand_in_refusal`'s question."""
    found: list[tuple[nn.Module, str, nn.Module, str]] = []
    names: list[str] = []
    for name, module in model.named_modules():
        family = family_of(module)
        if family is None or any(name.startswith(f + ".") for f in names):
            continue  # not attention, or inside an attention module already found
        parent_name, _, attr = name.rpartition(".")
        found.append((model.get_submodule(parent_name) if parent_name else model, attr, module, family))
        names.append(name)
    if not found:
        raise UnsupportedArchitecture(
            f"Our MHA cannot stand in for the attention of '{model.config.model_type}' models yet: it knows "
            f"{supported_models()}. Use Hugging Face's attention instead (every head's attention is still shown)."
        )
    return found


def heads_unread(modules: list[tuple[nn.Module, str]]) -> str | None:
    """Why the heads' outputs of `modules` ((module, family tag) pairs) are not read (`Family.unread`), or None where
    they are."""
    return next((FAMILIES[fam].unread for _, fam in modules if fam in FAMILIES and FAMILIES[fam].unread), None)


def found_attention(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules `find_attention` finds, or none: what a model whose heads' outputs are not read
    (Gemma 4's head sizes differ between layers) still runs its layers' attention in."""
    try:
        return [m for _, _, m, _ in find_attention(model)]
    except UnsupportedArchitecture:
        return []


def stand_in_refusal(found: list[tuple[nn.Module, str, nn.Module, str]], config) -> str | None:
    """Why our MHA cannot compute the attention modules `found` (by `find_attention`): the features
    it does not compute, named; None when it can."""
    first = {}  # the first module of each family found
    for _, _, module, family in found:
        first.setdefault(family, module)
    extras = [e for family, module in first.items() for e in FAMILIES[family].refuse(module, config)]
    if not extras:
        return None
    works = ("every head's attention is shown with it" if any(FAMILIES[f].unread for f in first)
             else "every per-head feature works with it")
    return (f"'{config.model_type}' attention uses {', '.join(extras)}, which our MHA does not compute. "
            f"Use Hugging Face's attention for this model ({works}).")


def make_adapter(module: nn.Module, family: str, config, *, causal: bool) -> Adapter:
    """Our MHA around one original attention module of family `family` (same parameters;
    GPT-2: a copy); a module that is ours already ("ours") is its own adapter."""
    adapter = FAMILIES[family].build(module, config, causal)
    if adapter is not module:
        adapter.train(module.training)
    return adapter


def output_projection(module: nn.Module, family: str) -> nn.Module:
    """The layer that applies W_O; its input is the concatenation of the heads' outputs z."""
    return FAMILIES[family].output_projection(module)


def value_path(module: nn.Module, family: str, config) -> ValuePath | None:
    """Where the values of an attention module of family `family` come out, read off the model's own
    modules (`Family.values`), or None."""
    return FAMILIES[family].values(module, config)


def install_local_attention(model: nn.Module, *, causal: bool) -> list[Adapter]:
    """Replace every self-attention of `model` with an adapter around our MHA, in place.

    Returns the adapters in the order the model runs them (layer 0 first); raises
    UnsupportedArchitecture as `find_attention` does.
    """
    found = find_attention(model)
    why = stand_in_refusal(found, model.config)
    if why is not None:
        raise UnsupportedArchitecture(why)
    adapters: list[Adapter] = []
    for parent, attr, module, family in found:
        adapter = make_adapter(module, family, model.config, causal=causal)
        setattr(parent, attr, adapter)
        adapters.append(adapter)
    return adapters

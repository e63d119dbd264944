"""The sidebar: model, device, precision, text and the options every view follows; `draw()`
turns them into this rerun's `state.Current` through the analysis steps (`ui.steps`). Links and
presets set its inputs through `choose` and read them through `choices`, never through the widget
keys."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import streamlit as st
import torch

import mha_viz
import mha_viz_models
from mha_viz import settings as deploy
from mha_viz.budget import memory
from mha_viz.budget.plan import Plan
from mha_viz.text import chat
from mha_viz.ui.kit import keys, resources, seq2seq_views, session
from mha_viz.ui.kit.analysis_key import AnalysisKey
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import chat_input, steps
from mha_viz.ui.shell.state import Current, with_last_good

log = logging.getLogger("mha_viz.ui")

DEFAULT_TEXT = "The cat sat on the mat because it was tired."
EXAMPLES = {
    "Pronoun (coreference)": "The animal didn't cross the street because it was too tired.",
    "Repeated phrase (induction)": "Harry Potter went to Hogwarts. Later, Harry Potter went home.",
    "Two sentences ([SEP])": "I went to the bank. The river bank was flooded.",
    "Long-range agreement": "The keys to the old wooden cabinet in the hall are missing.",
    "Code": "def add(a, b):\n    return a + b",
    "Repeated letters (for toy-induction)": "k d m x b f q z k d m x b f q z",
}
OTHER = "Other: hub id or folder…"
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = mha_viz_models.PRECISIONS  # "auto", "float32", "bfloat16", "float16"


@dataclass(frozen=True)
class Choices:
    """What the sidebar's inputs hold (what a link carries)."""

    model: str | None  # the model picked, or the hub id or folder typed under OTHER; None: nothing typed
    text: str | None
    hide: tuple[str, ...]  # "special", "first": *Hide tokens*
    ours: bool  # *Compute with our MHA*
    contributions: bool  # *Show attention as* contributions
    dtype: str  # *Precision*
    chat: tuple[str, str, str] | None = None  # *Input*: Chat, (user, system, reply); None: the text


def _on_example() -> None:
    """Put the chosen example in the box, keeping a text the user wrote for Undo (`_undo_example`)."""
    choice = session.get(keys.EXAMPLE)
    if choice in EXAMPLES:
        own = session.get(keys.TEXT) or ""
        if own not in EXAMPLES.values():  # one example over another keeps the way back to the user's text
            session.put(keys.EXAMPLE_UNDO, own if own.strip() else None)
        session.put(keys.TEXT, EXAMPLES[choice])


def _restore_text() -> None:
    own = session.pop(keys.EXAMPLE_UNDO)
    if own is not None:
        session.put_all((keys.TEXT, keys.EXAMPLE), (own, "—"))


def _undo_example() -> None:
    """While the box still holds the example, one click puts back the text it replaced."""
    own = session.get(keys.EXAMPLE_UNDO)
    if own is None or session.get(keys.TEXT) not in EXAMPLES.values():  # edited since: nothing to undo
        session.pop(keys.EXAMPLE_UNDO)
        return
    st.button("Undo: back to your text", key=keys.EXAMPLE_UNDO_GO, icon=":material/undo:", on_click=_restore_text,
              help=f"The example replaced your text (“{plain(own[:80])}{'…' if len(own) > 80 else ''}”).")


def default_precision() -> str:
    """The sidebar's *Precision* before a user picks one: MHA_VIZ_DTYPE (`mha-viz --dtype`), else "auto"."""
    return resources.settings().dtype


def precision() -> str:
    """This session's *Precision* (the sidebar's), or the server's default before it is drawn."""
    chosen = session.get(keys.PRECISION)
    return chosen if chosen in PRECISIONS else default_precision()


def model_options() -> list[str]:
    """The models a session may pick (the allow-list in public mode, else the bundled ones, the
    hub suggestions and OTHER: a free-form hub id or folder); a picker shows each as `model_title`."""
    conf = resources.settings()
    options = list(mha_viz_models.BUNDLED) + list(mha_viz_models.HUB_SUGGESTIONS)
    if conf.models:  # an allow-list: only those, and no free-form id or folder
        options = [m for m in options if m in conf.models] + [m for m in conf.models if m not in options]
    else:
        options.append(OTHER)
    return options


def model_title(key: str) -> str:
    """A model's title in the pickers, short enough for the sidebar's width (the rest: `model_detail`)."""
    if key in mha_viz_models.BUNDLED:
        return mha_viz_models.BUNDLED[key].title.partition(" (")[0]
    return f"{key} (Hub)" if key in mha_viz_models.HUB_SUGGESTIONS else key


def model_detail(key: str) -> str:
    """What a model's short title (`model_title`) leaves out, shown under the picker ("" for none)."""
    if key in mha_viz_models.BUNDLED:
        return mha_viz_models.BUNDLED[key].title.partition(" (")[2].removesuffix(")")
    return "From the Hugging Face Hub: needs internet once." if key in mha_viz_models.HUB_SUGGESTIONS else ""


def draw() -> Current:
    """Draw the sidebar and compute (or fetch) the run for its inputs."""
    session.setdefault(keys.TEXT, DEFAULT_TEXT)
    conf = resources.settings()
    options = model_options()
    if session.get(keys.MODEL_CHOICE) not in options:
        session.pop(keys.MODEL_CHOICE, None)
    with st.sidebar:  # what a person does first comes first: the model, then the sentence (in sight at 1366 × 768)
        choice = st.selectbox("Model", options, key=keys.MODEL_CHOICE, persist_state=keys.KEEP,
                              format_func=model_title)
        if model_detail(choice):
            st.caption(model_detail(choice))
        spec = choice
        if choice == OTHER:
            spec = st.text_input("Hub id or local folder", key=keys.MODEL_OTHER, persist_state=keys.KEEP,
                                 placeholder="e.g. gpt2, owner/model or /path/to/folder")
        mode_slot = st.empty()  # *Input* (Text or Chat), once the model is known to have a chat template
        asked = chat_input.draw_fields() if chat_input.chosen(spec) else None
        if asked is None:
            text = st.text_area("Sentence", key=keys.TEXT, persist_state=keys.KEEP, height=120,
                                placeholder="Type or paste a sentence, then press Ctrl+Enter")
            st.selectbox("Examples", ["—"] + list(EXAMPLES), key=keys.EXAMPLE, persist_state=keys.KEEP,
                         on_change=_on_example)
            _undo_example()
        else:
            text = asked.user
        top = resources.max_tokens() if conf.public else deploy.WHOLE_CONTEXT
        session.settle(keys.TOKEN_LIMIT, min(int(session.get(keys.TOKEN_LIMIT) or resources.max_tokens()), top))
        st.number_input("Token limit", min_value=2, max_value=top, step=128, key=keys.TOKEN_LIMIT,
                        persist_state=keys.KEEP,
                        help="Longer texts are cut to this many tokens (and to the model's own "
                             "limit: MiniLM reads 512, SmolLM2 8,192). Up to 1 GiB of every head's attention "
                             "(layers × heads × n² × 4 bytes, MHA_VIZ_DENSE_MB) is held at once; past it the "
                             "model runs once, each layer's queries and keys are kept, and every page "
                             "recomputes the rows it draws.")
        reads = st.empty()  # filled once the model is loaded: the model's own limit, where it is the lower
        st.subheader("How the model runs")
        device = st.radio("Device", DEVICES, key=keys.DEVICE, persist_state=keys.KEEP, horizontal=True,
                          help="auto uses CUDA when a GPU is available, else the CPU.")
        session.setdefault(keys.PRECISION, default_precision())
        dtype = st.radio("Precision", PRECISIONS, key=keys.PRECISION, persist_state=keys.KEEP, horizontal=True,
                         help="What the model computes in. auto: the checkpoint's own (the bundled models: "
                              "float32). bfloat16 and float16 halve the memory of the weights; the attention "
                              "shown is float32 in every precision, with rows that sum to 1.")
        emulated = st.empty()  # filled once the model is loaded: its precision without native support there
        local = st.toggle("Compute with our MHA", key=keys.LOCAL_ATTENTION, persist_state=keys.KEEP,
                          help="Replace every self-attention of the model with mha-viz's own "
                               "multi-head attention, carrying the same weights.")
        st.caption("Hide tokens (every view, renormalised)")
        st.checkbox("Special tokens", key=keys.HIDE_SPECIAL, persist_state=keys.KEEP,
                    help="Drop the tokenizer's special tokens (BERT's [CLS] and [SEP], a decoder's <s>, a chat's "
                         "role markers) from both axes of every head and divide each row by the attention it keeps "
                         "(as exBERT does). The Model view shows how much was hidden.")
        specials = st.empty()  # filled once the text is read: which special tokens it holds
        st.checkbox("The first token (attention sink)", key=keys.HIDE_FIRST, persist_state=keys.KEEP,
                    help="Drop the first token, where decoders park unused attention, and renormalise "
                         "each row over the rest.")
        if asked is not None:
            st.checkbox("The chat template's tokens (role headers, turn ends)", key=keys.HIDE_TEMPLATE,
                        persist_state=keys.KEEP,
                        help="Drop what the chat template adds around the messages and renormalise each row over "
                             "the messages' words (a default system prompt the template adds stays: its words are "
                             "the system's).")
        st.radio("Show attention as", (keys.LENS_WEIGHTS, keys.LENS_CONTRIBUTIONS), key=keys.LENS,
                 persist_state=keys.KEEP, horizontal=True,
                 help="Weights: where each head looks (α). Contributions: how much each key token moves the "
                      "head's output, α · ‖f(x)‖ with f(x) = (x W_V + b_V) W_O of that head, each row divided by "
                      "its sum (Kobayashi et al. 2020). A head can look hard at a token whose value it barely "
                      "moves ([CLS], [SEP], punctuation). Every view of the run follows.")
    cur = Current(stale=False)
    if not (spec or "").strip():
        cur.notice = "Type a Hugging Face hub id or the path of a model folder in the sidebar."
        return with_last_good(cur)
    if not text or not text.strip():
        if asked is not None:  # the chat's boxes are drawn: so is the way back to the text
            chat_input.draw_mode(mode_slot, spec)
        cur.notice = ("Type the user's message in the sidebar to see the chat's attention." if asked is not None
                      else "Type a sentence in the sidebar to see its attention.")
        return with_last_good(cur)
    try:
        model = resources.load_model(spec, device, local, dtype)
        if chat_input.learn(spec, model) and asked is None and session.get(keys.CHAT_MODE) == chat_input.CHAT:
            st.rerun()  # a chat asked (a link, a lesson) for a model whose template was not known yet: its boxes
        chat_input.draw_mode(mode_slot, spec, model)
        if asked is not None:  # the messages through the model's own template, each token's role told
            cur.chat = chat.roles(model, asked)
            text = cur.chat.text
        if note := mha_viz_models.emulated_note(model.dtype, model.device):
            emulated.caption(note)
        model_key = steps.model_key_of(model, local)
        cur.text_model, cur.text, cur.model_key = model, text, model_key
        cap = resources.token_cap()
        if model.max_positions < cap:  # the box says the session's cap; the model reads fewer (MiniLM: 512)
            reads.caption(f"{plain(model.name)} reads {model.max_positions:,} tokens at most: texts are cut there.")
        target, part = seq2seq_views.target_inputs() if model.is_encoder_decoder else (None, "")
        key = AnalysisKey(model_key, text, cap, None, target=target)
        plan = steps.plan_of(key, model)  # every layer: read and priced once
        if not model.is_encoder_decoder and (layers := _layers_to_capture(model, plan)):
            key = key._replace(layers=layers)
            plan = steps.plan_of(key, model)
        run = steps.cached_run(key, model, plan)
        if isinstance(run, mha_viz.capture.EncoderDecoderRun):
            cur.seq2seq, run, key = run, run.parts[part], key._replace(part=part)
    except (mha_viz.ModelLoadError, mha_viz.InputError) as exc:
        # NaN or infinity: the message says what to do, the log where
        if isinstance(exc, mha_viz.capture.NotFiniteError):
            log.exception("analysis not finite")
        cur.error = str(exc)
        return with_last_good(cur)
    except (MemoryError, torch.OutOfMemoryError):
        log.exception("out of memory")
        cur.error = f"This input needs more memory than this machine has free. {memory.OUT_OF_MEMORY_ADVICE}"
    except Exception as exc:  # noqa: BLE001 - shown as a message; the traceback goes to the log
        log.exception("analysis failed")
        cur.error = f"The analysis failed: {type(exc).__name__}: {str(exc)[:300]}"
        return with_last_good(cur)
    if cur.error:  # out of memory: given back here, past the handler, whose frames held the tensors
        memory.free_cache()
        return with_last_good(cur)
    cur.full_run = run
    specials.caption(special_note(run))
    run, key = steps.hide_tokens(cur, run, key, **_hidden())
    cur.weights_run = run
    run, key = steps.lens(cur, run, key, contributions=_contributions(), model=model, full=cur.full_run)
    cur.run, cur.model, cur.key = run, model, key
    return cur


def run_to_compare(model: mha_viz.LoadedModel, text: str, local: bool,
                   layers: tuple[int, ...] | None = None) -> tuple[mha_viz.AttentionRun, AnalysisKey]:
    """The sidebar's analysis of another text or model (the Compare page): the session's token
    cap, `layers` (None: every layer; InputError when that is over the capture budget) and the
    sidebar's *Hide tokens* and *Show attention as*. Returns the run as shown and its key."""
    if model.is_encoder_decoder:
        raise mha_viz.InputError(f"{model.name} is an encoder–decoder: comparing runs takes encoder-only and "
                                 "decoder-only models. Its encoder, decoder and cross-attention are on the Look pages.")
    model_key = steps.model_key_of(model, local)
    cap = resources.token_cap()
    layers = tuple(layer for layer in layers if 0 <= layer < model.num_layers) or None if layers else None
    key = AnalysisKey(model_key, text, cap, layers)
    plan = steps.plan_of(key, model)  # read and priced once: refused here, run below
    short = memory.shortfall(plan.need, resources.slots().room(model.device))
    if short:
        raise mha_viz.InputError(f"Every head of {model.name} at {plan.n} tokens would hold {short}: lower the token "
                                 "limit in the sidebar to compare.")
    run = steps.cached_run(key, model, plan)
    cur = Current()
    shown = steps.lens(cur, *steps.hide_tokens(cur, run, key, **_hidden()), contributions=_contributions(),
                       model=model, full=run)
    if cur.lens_note:  # the sidebar's run is contributions; this one would be weights: not comparable
        raise mha_viz.InputError(cur.lens_note + " Set the sidebar's “Show attention as” to weights to compare.")
    return shown


def _layers_to_capture(model: mha_viz.LoadedModel, plan: Plan) -> tuple | None:
    """None (every layer) when a full capture (its `plan`) fits the budget. Otherwise, before computing
    anything, the layers the user picked under "Layers to capture" (drawn in the sidebar only
    then, at most as many as fit); with none picked, an InputError that says what a full capture
    would cost and what fits."""
    n = plan.n
    if steps.is_long(model, n):  # a long run keeps no head's n × n: every layer, the rows drawn recomputed
        return None
    room = resources.slots().room(model.device)  # what the server has for one analysis, whatever else runs now
    short = memory.shortfall(plan.need, room)
    if not short:
        return None
    per_layer = model.attention_bytes(n, layers=1)
    fit = min(memory.layers_that_fit(model, n, room), model.num_layers - 1)
    full = f"Capturing every head of {model.name} at {n} tokens would hold {short}."
    if fit < 1:
        raise mha_viz.InputError(
            full + " Even one layer does not fit: lower the token limit in the sidebar.")
    kept = [layer for layer in session.get(keys.CAPTURE_LAYERS, [])
            if isinstance(layer, int) and 0 <= layer < model.num_layers]
    session.settle(keys.CAPTURE_LAYERS, kept[:fit])
    with st.sidebar:
        chosen = st.multiselect(
            "Layers to capture", list(range(model.num_layers)), key=keys.CAPTURE_LAYERS, persist_state=keys.KEEP,
            max_selections=fit,
            help=f"At {n} tokens one layer's heads hold {resources.size_text(per_layer)}: up to {fit} of the "
                 f"{model.num_layers} layers fit. The model still runs every layer.")
    if not chosen:
        raise mha_viz.InputError(
            full + f" Pick up to {fit} layers under “Layers to capture” in the sidebar "
            f"({resources.size_text(per_layer)} each), or lower the token limit.")
    return tuple(sorted(chosen))


def special_note(run) -> str:
    """What *Special tokens* would hide of `run`: its special tokens, each named once in the order met, or that it
    holds none."""
    mask = getattr(run, "special_mask", None)  # a cross-attention part has none of its own
    if mask is None:
        return ""
    names = list(dict.fromkeys(t for t, special in zip(run.tokens, mask) if special))
    if not names:
        return "This text holds none."
    return plain("This text's: " + ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else ""))


def _hidden() -> dict[str, bool]:
    """*Hide tokens* as `steps.hide_tokens`' arguments."""
    return {"special": bool(session.get(keys.HIDE_SPECIAL)), "first": bool(session.get(keys.HIDE_FIRST)),
            "template": bool(session.get(keys.HIDE_TEMPLATE))}


def _contributions() -> bool:
    return session.get(keys.LENS) == keys.LENS_CONTRIBUTIONS


def picked_model(choice_key: str, other_key: str) -> str | None:
    """What a model picker holds (the sidebar's, or another page's built the same way): its
    choice, or the hub id or folder typed under OTHER; None when nothing is."""
    choice = session.get(choice_key)
    model = (session.get(other_key) or "") if choice == OTHER else (choice or "")
    return model.strip() or None


def put_model(spec: str | None, choice_key: str, other_key: str) -> bool:
    """`spec` into a model picker (`choice_key`, and `other_key` for a hub id or folder typed in),
    before it is drawn; False when this server's picker cannot take it (nothing asked: True)."""
    if spec is None:
        return True
    options = model_options()
    if spec in options:
        session.put(choice_key, spec)
    elif OTHER in options:
        session.put_all((choice_key, other_key), (OTHER, spec))
    else:
        return False
    return True


def choices() -> Choices:
    """What the sidebar's inputs hold now."""
    model = picked_model(keys.MODEL_CHOICE, keys.MODEL_OTHER)
    said = tuple(session.get(k) or "" for k in (keys.CHAT_USER, keys.CHAT_SYSTEM, keys.CHAT_REPLY))
    chat = said if chat_input.chosen(model) and said[0].strip() else None
    return Choices(model=model, text=session.get(keys.TEXT) or None,
                   hide=tuple(h for h, on in _hidden().items() if on and (h != "template" or chat)),
                   ours=bool(session.get(keys.LOCAL_ATTENTION)), contributions=_contributions(), dtype=precision(),
                   chat=chat)


def choose(*, model: str | None = None, text: str | None = None, hide: tuple[str, ...] | None = None,
           ours: bool | None = None, contributions: bool | None = None, dtype: str | None = None,
           chat: tuple[str, str, str] | None | bool = False) -> bool:
    """Set the sidebar's inputs before it draws them (a link, a preset); None leaves one as it is (`chat`: False
    leaves it, None reads a text, (user, system, reply) a chat). False when this server does not offer `model` (the
    rest is set all the same). A `text` given without a chat switches the input to the text."""
    offered = put_model(model, keys.MODEL_CHOICE, keys.MODEL_OTHER)
    if text is not None:
        session.put(keys.TEXT, text)
    if chat is None or (chat is False and text is not None):  # a text given alone is read as a text
        session.put(keys.CHAT_MODE, chat_input.TEXT)
    elif chat is not False:
        session.put_all((keys.CHAT_MODE, keys.CHAT_USER, keys.CHAT_SYSTEM, keys.CHAT_REPLY), (chat_input.CHAT, *chat))
    if hide is not None:
        session.put_all((keys.HIDE_SPECIAL, keys.HIDE_FIRST, keys.HIDE_TEMPLATE),
                        ("special" in hide, "first" in hide, "template" in hide))
    if ours is not None:
        session.put(keys.LOCAL_ATTENTION, ours)
    if contributions is not None:
        session.put(keys.LENS, keys.LENS_CONTRIBUTIONS if contributions else keys.LENS_WEIGHTS)
    if dtype is not None:
        session.put(keys.PRECISION, dtype)
    return offered

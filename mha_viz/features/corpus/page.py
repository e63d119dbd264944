"""The Corpus page: every head's statistics over many documents (`mha_viz.corpus`), for the
sidebar's model. Documents come from the bundled sample, an upload or (locally) a path; the job
shows its progress, can be cancelled, and its result is kept on disk by (model, documents,
options), so a second visitor asking for the same gets it at once (`mha_viz.corpus.store`). Every
tenth document (at most 64) is held out of the statistics, to test the corpus importance order on
text it never saw (`mha_viz.corpus.split`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st

import mha_viz
from mha_viz import corpus, metrics
from mha_viz.corpus.split import HOLD_EVERY, HOLD_MIN_DOCS, Documents, documents
from mha_viz.corpus.store import statistics_store
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import pruning as pruning_figures
from mha_viz.drawing import style as figure_style
from mha_viz.features.corpus import controls as corpus_keys
from mha_viz.features.corpus import figures as corpus_figures
from mha_viz.features.corpus.plan import plan_pruning, plan_statistics
from mha_viz.interventions import ablation
from mha_viz.text import loss_inputs
from mha_viz.ui.kit import analysis, charts, jobs, keys, plans, resources, session
from mha_viz.ui.kit import head_scatter_view as scatter_view
from mha_viz.ui.kit.analysis_key import ModelKey
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import export_views, notebook_button, view_helpers

SCATTER = scatter_view.ScatterKeys(corpus_keys.CORPUS_SCATTER_X, corpus_keys.CORPUS_SCATTER_Y,
                                   corpus_keys.CORPUS_SCATTER_COLOUR, corpus_keys.CORPUS_SCATTER_CHART,
                                   corpus_keys.CORPUS_SCATTER_PICKED, corpus_keys.CORPUS_SCATTER_COMPARE)

log = logging.getLogger("mha_viz.ui")

SAMPLE, UPLOAD, PATH = "The bundled sample", "Upload a file", "A file on this machine"
LOCAL, RAY = "In this app", "On Ray (RAY_ADDRESS, or a local Ray)"
UPLOAD_CEILING_MB = 50  # .streamlit/config.toml's server.maxUploadSize: larger files by path (locally)
RANDOM_ORDERS = 3
FIRST_HELP = ("Cut the corpus to its first documents, in the file's order, before every tenth is held out: a quick "
              "first look at a large corpus. The statistics are kept under what was cut.")


class CorpusKey(NamedTuple):
    """What one corpus computation was made from: the model, the documents (their hash), the
    tokens per document, whether importance was asked for, and how many documents were held out.
    The results are kept under it (`mha_viz.corpus.store.statistics_store`)."""

    model: ModelKey
    corpus: str  # corpus.corpus_hash of the documents the statistics were computed on
    max_tokens: int
    importance: bool
    held_out: int


def _read_once(ident: tuple, read, first: int) -> Documents:
    """The documents of `ident` (the sample, an upload by its id, a path by size and time), cut to
    the `first` (0: all), read, split and hashed once per session, source and cut, not on every
    rerun (a 50 MB upload); another cut of the same source cuts the texts read, without reading them
    again. The cut comes before the split: its hash is the statistics' key."""
    kept = session.get(corpus_keys.CORPUS_DOCS)
    if kept is not None and kept[0] == ident and kept[2] == first:
        return kept[3]
    texts = kept[1] if kept is not None and kept[0] == ident else read()
    docs = documents(texts[:first] if first else texts)
    session.put(corpus_keys.CORPUS_DOCS, (ident, texts, first, docs))
    return docs


def _documents(conf) -> tuple[Documents, str] | None:
    sources = [SAMPLE, UPLOAD] + ([] if conf.public else [PATH])
    if session.get(corpus_keys.CORPUS_SOURCE) not in sources:
        session.put(corpus_keys.CORPUS_SOURCE, SAMPLE)
    source = st.radio("Documents", sources, key=corpus_keys.CORPUS_SOURCE, persist_state=keys.KEEP, horizontal=True)
    first = int(st.number_input("Use the first … documents (0: all)", 0, conf.max_corpus_docs, step=50,
                                key=corpus_keys.CORPUS_FIRST, persist_state=keys.KEEP, help=FIRST_HELP))

    def cut(docs: Documents) -> str:  # a corpus shorter than the cut is whole
        return f"; its first {first:,} only" if first and docs.count == first else ""
    limits = dict(max_docs=conf.max_corpus_docs, max_bytes=conf.max_corpus_mb * 2**20)
    try:
        if source == SAMPLE:
            docs = _read_once(("sample",), lambda: corpus.read_texts("sample"), first)
            return docs, f"the bundled sample ({docs.count} sentences{cut(docs)}; {corpus.SAMPLE_SOURCE})"
        column = st.text_input("Text column (.jsonl, .csv)", key=corpus_keys.CORPUS_COLUMN, persist_state=keys.KEEP,
                               placeholder="text",
                               help="Left empty: the first of text, sentence, content, document.") or None
        if source == UPLOAD:
            upload = st.file_uploader(
                "A .txt file (one document per line), or .jsonl / .csv with a text column", key=corpus_keys.CORPUS_FILE,
                type=["txt", "jsonl", "csv"], max_upload_size=min(conf.max_corpus_mb, UPLOAD_CEILING_MB),
                help=f"At most {conf.max_corpus_docs:,} documents and "
                     f"{min(conf.max_corpus_mb, UPLOAD_CEILING_MB)} MB here.")
            if upload is None:
                st.info("Choose a file to compute its statistics.", icon=":material/description:")
                return None
            docs = _read_once(("upload", upload.file_id, column), lambda: corpus.read_upload(
                upload.getvalue(), upload.name, text_column=column, **limits), first)
            notebook_button.record(file=upload.name)  # its notebook names the file
            return docs, f"{plain(upload.name)} ({docs.count:,} documents{cut(docs)})"
        path = st.text_input("Path", key=corpus_keys.CORPUS_PATH, persist_state=keys.KEEP,
                             placeholder="/data/sentences.txt")
        if not path.strip():
            st.info("Type the path of a .txt, .jsonl or .csv file on this machine.", icon=":material/description:")
            return None
        try:
            stat = Path(path.strip()).stat()
            stamp = (stat.st_size, stat.st_mtime_ns)
        except OSError:
            stamp = None  # read_texts says what is wrong
        docs = _read_once(("path", path.strip(), stamp, column),
                          lambda: corpus.read_texts(path.strip(), text_column=column, **limits), first)
        return docs, f"{plain(path.strip())} ({docs.count:,} documents{cut(docs)})"
    except mha_viz.InputError as exc:  # CorpusError: a message written for the user
        st.error(plain(str(exc)), icon=":material/warning:")
        return None


def corpus_page() -> None:
    cur = view_helpers.start_on_model("corpus",
                                      "The Corpus page uses the sidebar's model: fix the message above first.")
    if cur is None:
        return
    conf = resources.settings()
    st.caption(f"Every head of {plain(cur.model.name)} over many documents: each metric's mean and spread "
               "(every document weighs the same), each head's most frequent pattern class and the corpus "
               "importance. One sentence is a small sample; this says what a head does in general.")
    got = _documents(conf)
    if got is None:
        return
    docs, label = got
    train, held = docs.train, docs.held
    cols = st.columns(4)
    top = min(512, cur.model.max_positions, resources.token_cap())
    session.settle(corpus_keys.CORPUS_TOKENS, min(int(session.get(corpus_keys.CORPUS_TOKENS) or 128), top))
    max_tokens = cols[0].number_input("Tokens per document", 2, top, key=corpus_keys.CORPUS_TOKENS,
                                      persist_state=keys.KEEP, step=32,
                                      help="Longer documents are cut to this many tokens.")
    session.start_at(corpus_keys.CORPUS_BATCH, 16, lambda b: b in (8, 16, 32))
    batch = cols[1].selectbox("Batch size", (8, 16, 32), key=corpus_keys.CORPUS_BATCH, persist_state=keys.KEEP)
    embedding = loss_inputs.loss_kind(cur.model) == loss_inputs.EMBEDDING
    if session.get(corpus_keys.CORPUS_MODEL_SEEN) != cur.model_key:  # a new model: its own default
        session.put(corpus_keys.CORPUS_MODEL_SEEN, cur.model_key)
        session.put(corpus_keys.CORPUS_IMPORTANCE, not embedding)  # off where it costs a pass a head
    importance = cols[2].toggle("Importance", key=corpus_keys.CORPUS_IMPORTANCE, persist_state=keys.KEEP,
                                help="Michel et al.'s gradient importance summed over the documents: one backward "
                                     "pass a batch. Embedding models (minilm) have no gradient signal, so each head "
                                     f"is switched off in turn: {cur.model.num_layers * cur.model.num_heads} extra "
                                     "passes a batch, off by default.")
    engine = LOCAL if conf.public else cols[3].radio("Run", (LOCAL, RAY), key=corpus_keys.CORPUS_ENGINE,
                                                     persist_state=keys.KEEP)
    key = CorpusKey(cur.model_key, docs.digest, int(max_tokens), bool(importance), len(held))
    st.caption(f"Documents: {label}. " + (f"The statistics use {len(train):,} of them; {len(held)} (every "
               f"{HOLD_EVERY}th) are held out to test the importance order." if held else
               f"All {len(train):,} are used (under {HOLD_MIN_DOCS} documents, none is held out)."))
    if jobs.cancelled(corpus_keys.CORPUS_RUNNING) is not None:
        st.warning("The corpus job was cancelled; nothing was kept.", icon=":material/stop_circle:")
    stats = statistics_store().get(key)
    if stats is None:
        buttons = jobs.buttons(f"Compute over {len(train):,} documents", corpus_keys.CORPUS_GO,
                               cancel_key=corpus_keys.CORPUS_CANCEL, cancel_help="Stop the job; nothing is kept.")
        if not buttons.pressed:
            return
        stats, error = jobs.run(corpus_keys.CORPUS_RUNNING, key,
                                lambda progress: _compute(cur, key, train, int(batch), engine, progress),
                                first="Starting…", what="The corpus job",
                                out_of_memory="The corpus job ran out of memory: lower the batch size or the tokens "
                                              "per document.")
        if error:  # the message is below the buttons; any change draws them afresh
            buttons.idle()
            st.error(plain(error), icon=":material/warning:")
            return
        buttons.done()
    _results(cur, key, stats, held)


def _compute(cur, key: CorpusKey, train: list[str], batch: int, engine: str, progress: jobs.Progress):
    """The statistics of `key`: kept already, computed here with their progress on `progress`, or,
    when another session is computing the same, its result once it is done."""

    def compute():  # Ray's actors load the model themselves, by the name (and MHA) it was loaded with
        return plans.run_admitted(plan_statistics(cur.model, train, engine="ray" if engine == RAY else "local",
                                                  batch=batch, max_tokens=key.max_tokens, importance=key.importance),
                                  progress=progress)

    def waiting() -> None:  # each update lets Streamlit stop this run (Cancel, any widget)
        progress(0.0, "Another visitor is computing these same statistics: they will be yours too when that job "
                      "finishes…")
    return statistics_store().obtain(key, compute, tick=waiting)


def _results(cur, key: CorpusKey, stats, held: list[str]) -> None:
    session.put(keys.CORPUS_LAST, key)  # the Head examples page shows these; the head view links to them
    table = stats.table
    rate = stats.n_docs / stats.seconds if stats.seconds else 0.0
    st.success(f"{stats.n_docs:,} documents, {stats.n_tokens:,} tokens"
               + (f", computed in {stats.seconds:.1f} s ({rate:.1f} documents/s)." if stats.seconds else ".")
               + " Each head's top documents and the head finder are on **Head examples**.",
               icon=":material/library_books:")
    if st.button("Open Head examples", key=corpus_keys.CORPUS_TO_EXAMPLES, icon=":material/arrow_forward:"):
        session.put(keys.GOTO, "examples")
        st.rerun()
    names = [c for c in metrics.METRICS if c in table.columns and f"{c}_std" in table.columns]
    metric = st.selectbox("Metric", names, key=corpus_keys.CORPUS_METRIC, persist_state=keys.KEEP,
                          format_func=lambda c: metrics.METRICS[c].label)
    label = metrics.METRICS[metric].label
    left, right = st.columns(2)
    charts.show(corpus_figures.mean_grid(table, metric, label=label), key=corpus_keys.CORPUS_MEAN, where=left,
                name=f"corpus-{metric}-mean")
    charts.show(corpus_figures.spread_grid(table, metric, label=label), key=corpus_keys.CORPUS_SD, where=right,
                name=f"corpus-{metric}-sd")
    st.subheader("Head types")
    charts.show(corpus_figures.pattern_map(table), key=corpus_keys.CORPUS_PATTERNS, name="corpus-head-types")
    counts = table["pattern"].str.split(":").str[0].value_counts()
    st.caption("Most frequent class of each head over the documents. Heads per class: "
               + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".")
    scatter_view.section(table, SCATTER, about=f"means over {stats.n_docs:,} documents", cache_key=key)
    _importance(cur, key, stats, held)
    _this_sentence(cur, table, metric, label, stats.lengths)
    stem = figure_style.safe_filename(f"{cur.model.name}-corpus-{stats.n_docs}")
    st.download_button("Download the corpus head table (CSV)", export_views.table_csv(table),
                       file_name=f"{stem}.csv", mime="text/csv", key=corpus_keys.DL_CORPUS)


def _importance(cur, key: CorpusKey, stats, held: list[str]) -> None:
    st.subheader("Corpus importance")
    if stats.importance is None:
        st.info(plain(stats.importance_note or "Importance was not asked for."), icon=":material/info:")
        return
    charts.show(metric_figures.metric_grid(stats.importance, title="Head importance over the corpus "
                                           "(per-layer L2-normalised)", layer_ids=sorted(set(stats.table["layer"]))),
                key=corpus_keys.CORPUS_IMPORTANCE_GRID, name="corpus-importance")
    if not held:
        st.caption(f"Under {HOLD_MIN_DOCS} documents nothing is held out, so there is no pruning check.")
        return
    done = session.setdefault(corpus_keys.CORPUS_PRUNED, {})
    if key not in done:
        if not st.button(f"Check the order on the {len(held)} held-out documents", key=corpus_keys.CORPUS_PRUNE,
                         help=f"Switch heads off least important first, and in {RANDOM_ORDERS} random orders: "
                              "if the importance order is right, the loss rises later."):
            return
        try:
            done.clear()  # one curve at a time per session
            done[key] = resources.one_at_a_time(lambda: _pruning(cur.model, stats.importance, held, key.max_tokens))
        except Exception as exc:  # noqa: BLE001 - a message; the traceback goes to the log
            log.exception("corpus pruning failed")
            st.error(plain(f"The pruning check failed: {type(exc).__name__}: {str(exc)[:300]}"),
                     icon=":material/warning:")
            return
    curve = done[key]
    kind = loss_inputs.loss_kind(cur.model)
    charts.show(pruning_figures.pruning_curve(curve, loss_label=loss_inputs.LOSS_LABELS[kind].split(" (")[0]),
                key=corpus_keys.CORPUS_PRUNING, name="corpus-pruning")
    st.caption(f"Mean loss over the {len(held)} held-out documents, which the importance never saw.")
    st.download_button("Download the pruning curve (CSV)", export_views.table_csv(curve),
                       file_name="corpus-pruning-curve.csv", mime="text/csv", key=corpus_keys.DL_CORPUS_PRUNE)


def _pruning(model, importance: np.ndarray, held: list[str], max_tokens: int) -> pd.DataFrame:
    fractions = ablation.PRUNE_FRACTIONS
    curves = plans.run_admitted(plan_pruning(model, importance, held, max_tokens, fractions, RANDOM_ORDERS))
    by_importance, randoms = curves[0], curves[1:]
    return pd.DataFrame({"fraction of heads off": fractions, "importance order": by_importance,
                         "random mean": randoms.mean(0), "random sd": randoms.std(0)})


def _this_sentence(cur, table: pd.DataFrame, metric: str, label: str, lengths) -> None:
    st.subheader("This sentence against the corpus")
    run = cur.full_run or cur.run
    if run.partial:
        st.info("The sidebar's sentence was captured for some layers only (see the sidebar): lower the token "
                "limit to compare every head with the corpus.", icon=":material/info:")
        return
    here = analysis.head_table(cur.key._replace(hidden=()), run, cur.model)
    if metric not in here.columns:
        st.info("The sidebar's sentence has no value of this metric.", icon=":material/info:")
        return
    left, right = st.columns(2)
    charts.show(corpus_figures.versus(table, here, metric, label=label), key=corpus_keys.CORPUS_VERSUS, where=left,
                name=f"corpus-versus-{metric}")
    charts.show(corpus_figures.deviation_grid(table, here, metric, label=label), key=corpus_keys.CORPUS_DEVIATION,
                where=right, name=f"corpus-deviation-{metric}")
    z = corpus_figures.deviation(table, here, metric)
    row, head = np.unravel_index(int(np.abs(z).argmax()), z.shape)
    st.caption(f"The sidebar's sentence ({run.n} tokens) against the corpus mean of every head. Most unusual here: "
               f"layer {sorted(set(table['layer']))[row]}, head {head} ({z[row, head]:+.1f} sd).")
    check = None if lengths is None else corpus.length_check(lengths, run.n, metric, z)  # the rule: corpus/length.py
    if check is not None and check.explains:
        st.info(check.message(), icon=":material/straighten:")

"""The page *Circuit behind a prediction*'s controls and session keys. Its pair is shared with *Heads behind a
prediction* (`shared_controls.PAIR`, drawn by the shell's `pair`: corrupted, answer and wrong in a link); its estimate
and the edges drawn are carried as ``circuit`` and ``k``, the names links gave them before they were controls. A link
from this page always names its estimate, and opening one that does finds the circuit at once."""

from __future__ import annotations

from mha_viz.export import shared_controls
from mha_viz.export import view_params as vp

CIRC_METHOD = "circ_method"  # the estimate's slug, one of LABELS
CIRC_K = "circ_k"  # edges drawn
CIRC_FILE = "circ_file"  # a saved circuit (JSON) to open
LABELS = {"eap-ig": "EAP-IG", "eap": "EAP"}  # the estimates: their slug (a link's, a saved circuit's), their label
MAX_DRAWN, DEFAULT_DRAWN = 300, 30  # edges the graph draws: at most, at first

CONTROLS = (
    *shared_controls.PAIR,
    vp.choice(CIRC_METHOD, tuple(LABELS), param="circuit"),  # no default: always written (it asks for the circuit)
    vp.number(CIRC_K, 1, MAX_DRAWN, default=DEFAULT_DRAWN, param="k"),
    *vp.local("an upload: a saved circuit", CIRC_FILE),
)

# the page's own session keys besides its controls: its results, buttons and selections, which no link carries
CIRC_GO = "circ_go"
CIRC_CANCEL = "circ_cancel"
CIRC_RUNNING = "_circ_running"  # set while the edges are estimated (jobs.run)
CIRC_RESULTS = "_circ_results"  # {(pair.Pair, method): Edges} of the pair on screen
CIRC_GRAPH = "circ_graph"  # the graph's selection events
CIRC_PICKED = "_circ_picked"  # (pair.Pair, method, sender, receiver): the edge clicked last
CIRC_REAL = "_circ_real"  # {(pair.Pair, ...): a value run for real}: edges clicked, the chosen k, the top 20
CIRC_TOP_GO = "circ_top_go"  # patch the top 20 edges for real
CIRC_REAL_CANCEL = "circ_real_cancel"  # Cancel while something runs for real
CIRC_REAL_RUNNING = "_circ_real_running"  # set while it runs (jobs.run)
CIRC_STOPPED = "_circ_stopped"  # {(pair.Pair, what)} cancelled: run again only when asked
CIRC_AGAIN_K = "circ_again_k"  # run a cancelled one again
CIRC_AGAIN_EDGE = "circ_again_edge"
CIRC_OPENED = "_circ_opened"  # the file id of the saved circuit opened last (opened once)
CIRC_PENDING = "_circ_pending"  # a saved circuit waiting for its pair to be on the page
CIRC_PLAN = "_circ_plan"  # ((pair, estimate), its plan or None, why it cannot run or None): planned once a pair
# (`plans.kept_plan`: the model's edge graph alone takes 0.14 s to build for SmolLM2)
CIRC_OPEN_PAIR = "circ_open_pair"  # the button that puts a saved circuit's pair on the page
DL_CIRC_CSV = "dl_circ_csv"
DL_CIRC_JSON = "dl_circ_json"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the upload of a saved circuit
NOT_KEPT = frozenset({CIRC_FILE})

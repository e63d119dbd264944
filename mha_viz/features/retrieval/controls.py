"""The page *Retrieval heads*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

RETRIEVAL_LENGTH = "retrieval_length"  # the prompt's tokens, the needle in it
RETRIEVAL_DEPTHS = "retrieval_depths"  # where the needle goes, in % of the haystack
DEPTHS = (10, 25, 50, 75, 90)
DEFAULT_DEPTHS = (10, 50, 90)
DEFAULT_LENGTH = 1024
MIN_LENGTH = 32

# the page's inputs that no link or lesson step carries (`vp.local` controls of CONTROLS, with why),
# and its other keys that the kit's keys held
RETRIEVAL_NEEDLE = "retrieval_needle"  # the needle sentence and the question after it
RETRIEVAL_QUESTION = "retrieval_question"

CONTROLS = (vp.number(RETRIEVAL_LENGTH, MIN_LENGTH, 131_072), vp.picks(RETRIEVAL_DEPTHS, DEPTHS),
    *vp.local("free sentences, too long for a link (a link runs the default needle and question)",
              RETRIEVAL_NEEDLE, RETRIEVAL_QUESTION),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
RETRIEVAL_GO = "retrieval_go"  # buttons
RETRIEVAL_CANCEL = "retrieval_cancel"
RETRIEVAL_GRID = "retrieval_grid"  # the grid's selection event
RETRIEVAL_LOOK = "retrieval_look"
RETRIEVAL_LAYER = "retrieval_layer"
RETRIEVAL_HEAD = "retrieval_head"
RETRIEVAL_RUNNING = "_retrieval_running"  # what the job was for: still here on the next run if cancelled
RETRIEVAL_FOUND = "_retrieval_found"  # (what it was for, `tasks.retrieval.Retrieval`): the session's last result

NOT_KEPT = vp.head_pickers(RETRIEVAL_LAYER, RETRIEVAL_HEAD)  # its inputs drawn without persist_state=KEEP

"""Results out of the app: the self-contained HTML report (`report`) and a view as URL parameters (`link_params`).

The names below are imported on first use (`lazy_loader`): the `mha-viz` launcher reads the bundled lessons
(`lesson`) without the report's and the notebook's libraries."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(__name__, submod_attrs={
    "lesson": ["Lesson", "LessonError", "lesson_json", "read_lesson"],
    "notebook": ["view_notebook"],
    "notebook_view": ["NotebookView"],
    "report": ["html_report"],
})


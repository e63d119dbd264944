"""Results out of the app: the self-contained HTML report (`report`) and a view as URL parameters (`link_params`)."""

from mha_viz.export.lesson import Lesson, LessonError, lesson_json, read_lesson
from mha_viz.export.notebook import view_notebook
from mha_viz.export.notebook_view import NotebookView
from mha_viz.export.report import html_report

__all__ = ["Lesson", "LessonError", "NotebookView", "html_report", "lesson_json", "read_lesson", "view_notebook"]

"""``python -m dp_pipeline.cli``: the ``dp-pipeline`` command."""

from dp_pipeline.cli import app

app()

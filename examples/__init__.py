"""Examples that run: `.venv/bin/python examples/<name>.py`."""

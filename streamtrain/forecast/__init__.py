"""forecast: traffic forecasters (FEDformer-style, seasonal naive, ETS) and their evaluation.

Not implemented yet: tracked in issue #6. See docs/architecture.md for its place.
"""

"""scale: throughput models, proactive plans, stabilization, fallback, executors.

Not implemented yet: tracked in issue #7. See docs/architecture.md for its place.
"""

"""ingest: the worker-side consumer library (at-least-once, batched, torch and tf.data).

Not implemented yet: tracked in issue #3. See docs/architecture.md for its place.
"""

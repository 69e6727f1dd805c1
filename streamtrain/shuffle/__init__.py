"""shuffle: KALE §3.5 global data shuffling between workers over ZeroMQ.

Not implemented yet: tracked in issue #4. See docs/architecture.md for its place.
"""

"""lag: per-partition lag in records and seconds, CPS, status and alerts (Faust app).

Not implemented yet: tracked in issue #5. See docs/architecture.md for its place.
"""

"""sim: deterministic replay of traffic traces against scaling policies (KALE Table 3).

Not implemented yet: tracked in issue #8. See docs/architecture.md for its place.
"""

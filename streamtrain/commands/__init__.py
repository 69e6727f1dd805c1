"""Command groups of the ``streamtrain`` CLI, one module per subsystem (thin shims)."""

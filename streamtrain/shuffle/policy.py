"""The shuffle policies (KALE Table 2), in a module light enough for the command line.

Owned here: :class:`ShufflePolicy`. It imports nothing of ZeroMQ (nor anything else of
the shuffle layer), so ``streamtrain worker --help`` and ``streamtrain demo`` can offer
its values without loading the shuffle.
"""

from __future__ import annotations

import enum

__all__ = ["ShufflePolicy"]


class ShufflePolicy(enum.StrEnum):
    """How a worker shares its records with peers (KALE §4.3).

    ``none``: every record is trained by the worker that read it.
    ``basic``: each worker forwards an even share of what it reads to every peer,
    regardless of the peers' need.
    ``advanced``: the threshold policy: a worker forwards only what overflows its full
    local queue, and only to peers that announced they are receiving.
    """

    NONE = "none"
    BASIC = "basic"
    ADVANCED = "advanced"

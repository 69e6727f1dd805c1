"""publish: every send awaited at once; confirmed and failed items in the batch's order."""

import asyncio

from streamtrain.control.publish import Published, publish


async def ok():
    return None


async def boom():
    raise OSError("broker away")


async def slow():
    await asyncio.Event().wait()  # never finishes: the timeout fails it


def test_confirmed_and_failed_items_keep_the_batch_order():
    sends = [("a", ok()), ("b", boom()), ("c", ok()), ("d", slow())]
    published = asyncio.run(publish(sends, timeout_s=0.05))
    assert published.confirmed == ("a", "c")
    assert [item for item, _ in published.failed] == ["b", "d"] == published.failed_items
    assert isinstance(published.failed[0][1], OSError)
    assert isinstance(published.failed[1][1], TimeoutError)


def test_an_empty_batch():
    published: Published[str] = asyncio.run(publish([], timeout_s=1.0))
    assert published.confirmed == () and published.failed == ()

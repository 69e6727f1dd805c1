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


def test_a_send_counts_only_once_its_delivery_future_is_confirmed():
    """A Faust send returns once the message is *enqueued*, with a
    delivery future that aiokafka fails after its request timeout when the broker is
    gone; such a send must be reported failed (so it stays in the outbox), and one whose
    future never resolves fails by the timeout."""

    async def run():
        loop = asyncio.get_running_loop()
        delivered, lost, hanging = loop.create_future(), loop.create_future(), loop.create_future()

        async def enqueue(future):
            return future  # what `await topic.send(...)` gives: the delivery future

        loop.call_soon(delivered.set_result, "metadata")
        loop.call_soon(lost.set_exception, OSError("KafkaTimeoutError: batch expired"))
        published = await publish(
            [("a", enqueue(delivered)), ("b", enqueue(lost)), ("c", enqueue(hanging))],
            timeout_s=0.05,
        )
        return published, hanging

    published, hanging = asyncio.run(run())
    assert published.confirmed == ("a",)
    assert published.failed_items == ["b", "c"]
    assert isinstance(published.failed[0][1], OSError)
    assert isinstance(published.failed[1][1], TimeoutError)
    assert not hanging.cancelled()  # the producer's own future is left to the producer

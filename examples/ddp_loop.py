"""Your own DDP training loop, on streamtrain's elastic workers.

A data-parallel loop as you would write it for torch DDP::

    model = DistributedDataParallel(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()

On streamtrain the loader is your Kafka topic and the engine (``--engine torchft``)
takes the place of DDP, ``zero_grad`` and ``step``: it averages the gradients over every
worker's records, steps the optimizer only when the step committed on every worker,
commits the records' offsets after that, and lets workers join (they heal from a live
peer) and leave between steps. You keep the model, the optimizer and the body of the
loop: :func:`make` returns them. Run it:

    .venv/bin/python examples/ddp_loop.py

which starts an embedded broker, ``streamtrain lighthouse`` and two workers
(``streamtrain worker --engine torchft --entry ddp_loop:make --app-dir examples``) on
2,000 JSON records ``{"x": [4 floats], "y": float}``, and prints each worker's summary.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from streamtrain.elastic.app import TrainingParts
from streamtrain.ingest.decoders import Field, JsonDecoder
from streamtrain.ingest.reader import Batch


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.layers(x)
        return out.squeeze(1)


def forward_backward(model: torch.nn.Module, batch: Batch) -> float:
    """The body of the loop, without zero_grad and step (the engine does those)."""
    x, y = torch.from_numpy(batch["x"]), torch.from_numpy(batch["y"])
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return float(loss.detach())


def make() -> TrainingParts:
    """The entry point: ``streamtrain worker --entry ddp_loop:make``."""
    torch.manual_seed(0)  # every worker starts alike (a joiner heals from a peer anyway)
    model = Net()
    return TrainingParts(
        decoder=JsonDecoder([Field("x", np.float32, (4,)), Field("y", np.float32)]),
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.05),
        step_fn=forward_backward,
    )


def main() -> int:
    """Two workers train one model on an embedded broker; their summaries."""
    from confluent_kafka import Producer

    from streamtrain.broker import EmbeddedBroker
    from streamtrain.elastic.lighthouse import LighthouseProcess, LighthouseSettings
    from streamtrain.kafka import create_topic

    rng = np.random.default_rng(0)
    with EmbeddedBroker() as broker, LighthouseProcess(LighthouseSettings(port=0)) as lighthouse:
        kafka = broker.kafka_settings()
        create_topic(kafka, "ddp-example", 4)
        producer = Producer(kafka.confluent_config())
        for _ in range(2_000):
            x = rng.normal(size=4)
            y = float(x @ [1.0, -2.0, 0.5, 0.0] + 0.1 * rng.normal())
            producer.produce("ddp-example", json.dumps({"x": x.tolist(), "y": y}).encode())
        producer.flush(30)
        address = lighthouse.address or ""
        argv = [
            sys.executable, "-m", "streamtrain", "worker",
            "--bootstrap", broker.bootstrap, "--topic", "ddp-example", "--group", "ddp-example",
            "--entry", "ddp_loop:make", "--app-dir", str(Path(__file__).parent),
            "--engine", "torchft", "--lighthouse", address,
            "--batch-records", "100", "--idle-exit-s", "5", "--throughput-topic", "",
        ]  # fmt: skip
        workers = [
            subprocess.Popen([*argv, "--worker-id", f"worker-{i}"], stdout=subprocess.PIPE)  # noqa: S603
            for i in range(2)
        ]
        summaries = [json.loads(w.communicate(timeout=300)[0].splitlines()[-1]) for w in workers]
    for summary in summaries:
        print(json.dumps({k: summary[k] for k in ("worker_id", "records_trained", "engine")}))
    return 0 if sum(s["records_trained"] for s in summaries) >= 2_000 else 1


if __name__ == "__main__":
    sys.exit(main())

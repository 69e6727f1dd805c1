"""Entry points for `streamtrain worker`, and the worker run's limits and summary."""

import textwrap

import pytest

from streamtrain.errors import ConfigError
from streamtrain.ingest.decoders import RawDecoder
from streamtrain.worker import TrainingApp, WorkerRun, WorkerSummary, load_app


def test_builtin_app_is_the_mmoe_example():
    app = load_app(None)
    assert isinstance(app, TrainingApp)
    assert type(app).__name__ == "MmoeCtrApp"


def test_entry_point_from_app_dir(tmp_path):
    (tmp_path / "my_trainer_mod.py").write_text(
        textwrap.dedent(
            """
            from streamtrain.ingest.decoders import RawDecoder

            class App:
                decoder = RawDecoder()
                def step(self, batch):
                    return len(batch)

            def make():
                return App()
            """
        )
    )
    app = load_app("my_trainer_mod:make", str(tmp_path))
    assert isinstance(app.decoder, RawDecoder)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("no_colon", "module:function"),
        ("streamtrain_no_such_module_xyz:make", "cannot import"),
        ("streamtrain.worker.run:no_such_attr", "no attribute"),
        ("streamtrain.worker.run:__all__", "not callable"),
        ("streamtrain.worker.run:WorkerRun", "lacks a `decoder`"),
    ],
)
def test_bad_entry_points_are_clear(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        load_app(spec)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_records": 0}, {"idle_exit_s": 0}, {"sample_interval_s": 0}, {"metrics_port": 70000}],
)
def test_bad_run_limits(kwargs):
    with pytest.raises(ConfigError):
        WorkerRun(**kwargs)


def test_summary_json():
    summary = WorkerSummary("w", 2, 10, 8, 1, 2.0, {("t", 1): 5, ("t", 0): 3})
    payload = summary.to_json()
    assert (payload["records_trained"], payload["records_per_s"]) == (8, 4.0)
    assert "samples_trained" not in payload and "samples_per_s" not in payload
    assert payload["committed"] == [
        {"topic": "t", "partition": 0, "offset": 3},
        {"topic": "t", "partition": 1, "offset": 5},
    ]
    assert isinstance(RawDecoder(), object)


def test_summary_json_reports_memory_when_measured():
    memory = {"rss_start_mib": 100.0, "rss_growth_mib": 40.0, "within_bound": True}
    payload = WorkerSummary("w", 1, 1, 1, 0, 1.0, memory=memory).to_json()
    assert payload["memory"] == memory
    assert "memory" not in WorkerSummary("w", 1, 1, 1, 0, 1.0).to_json()

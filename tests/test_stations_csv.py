"""Tests of the station-CSV reader: integer and tz-aware times, missing-value markers, sentinels, blank times."""

import pyproj  # noqa: F401  isort: skip  (before anything loads eccodes; see geonp/__init__.py)

import warnings

import numpy as np
import pandas as pd
import pytest

from geonp.errors import DataFormatError
from geonp.io import open_dataset

HEADER = "station,lat,lon,time,v\n"


def _csv(tmp_path, rows, header=HEADER, name="obs.csv"):
    path = tmp_path / name
    path.write_text(header + "".join(f"{row}\n" for row in rows))
    return path


def test_integer_yyyymmdd_times(tmp_path):
    """Integer dates 19900601 (GHCN / ECA&D) are read as YYYYMMDD, not as nanoseconds since 1970."""
    ds = open_dataset(_csv(tmp_path, ["a,50,1,19900601,1", "a,50,1,19900701,2", "b,51,2,19900601,3"]))
    assert list(ds.time.values) == list(pd.to_datetime(["1990-06-01", "1990-07-01"]))
    np.testing.assert_array_equal(ds.v.values, [[1.0, 3.0], [2.0, np.nan]])


def test_digit_string_yyyymmddhh_times(tmp_path):
    """Digit strings of 10 digits are read as YYYYMMDDHH."""
    ds = open_dataset(_csv(tmp_path, ["a,50,1,1990060112,1", "a,50,1,1990060200,2"]), dtype={"time": str})
    assert list(ds.time.values) == list(pd.to_datetime(["1990-06-01T12:00", "1990-06-02T00:00"]))


@pytest.mark.parametrize("times", [("1990", "1991"), ("1577836800", "1577840400"), ("19900601.5", "19900602.5")])
def test_other_numeric_times_refused(tmp_path, times):
    """Years, seconds since 1970 and fractional numbers are refused, not read as nanoseconds."""
    path = _csv(tmp_path, [f"a,50,1,{times[0]},1", f"a,50,1,{times[1]},2"])
    with pytest.raises(DataFormatError, match=r"holds numbers such as .* not dates.*YYYYMMDD"):
        open_dataset(path)


def test_invalid_yyyymmdd_refused(tmp_path):
    """An impossible YYYYMMDD date among valid ones is named with its line."""
    path = _csv(tmp_path, ["a,50,1,19900601,1", "a,50,1,19900701,1", "a,50,1,19901301,2"])
    with pytest.raises(DataFormatError, match=r"'19901301' \(line 4\) is not a valid date"):
        open_dataset(path)


def test_times_before_1800_refused(tmp_path):
    """Times before 1800 are refused (numbers or typos read as dates)."""
    with pytest.raises(DataFormatError, match=r"'1700-01-01' \(line 2\).*before 1800"):
        open_dataset(_csv(tmp_path, ["a,50,1,1700-01-01,1"]))


def test_tz_aware_times_converted_to_utc(tmp_path):
    """Times with Z, +01:00 or mixed offsets become naive UTC times."""
    rows = ["a,50,1,1990-06-01T01:00:00+01:00,1", "a,50,1,1990-06-02T00:00:00Z,2", "b,51,2,1990-06-01T00:00:00Z,3"]
    ds = open_dataset(_csv(tmp_path, rows))
    assert ds.time.dtype.kind == "M"
    assert list(ds.time.values) == list(pd.to_datetime(["1990-06-01", "1990-06-02"]))
    np.testing.assert_array_equal(ds.v.values, [[1.0, 3.0], [2.0, np.nan]])
    one = open_dataset(_csv(tmp_path, ["a,50,1,1990-06-01T00:00:00Z,1"], name="z.csv"))
    assert one.time.dtype.kind == "M" and one.time.values[0] == np.datetime64("1990-06-01T00:00")


def test_missing_markers_read_as_nan(tmp_path):
    """M, NA, -, T and empty cells in a value column read as NaN; text columns stay text."""
    rows = ["a,50,1,1990-06-01,M,1,x", "a,50,1,1990-06-02,2,NA,y", "a,50,1,1990-06-03, - ,T,",
            "a,50,1,1990-06-04,4,5,z"]
    ds = open_dataset(_csv(tmp_path, rows, header="station,lat,lon,time,tmax,ppt,flag\n"))
    np.testing.assert_array_equal(ds.tmax.values[:, 0], [np.nan, 2.0, np.nan, 4.0])
    np.testing.assert_array_equal(ds.ppt.values[:, 0], [1.0, np.nan, np.nan, 5.0])
    assert "flag" not in ds.data_vars


def test_non_numeric_value_refused(tmp_path):
    """A value column with a cell that is neither a number nor a missing marker is refused, naming both."""
    rows = ["a,50,1,1990-06-01,M", "a,50,1,1990-06-02,2", "a,50,1,1990-06-03,3", "a,50,1,1990-06-04,oops"]
    with pytest.raises(DataFormatError, match=r"column 'v' holds numbers.*'oops' \(line 5\).*na_values"):
        open_dataset(_csv(tmp_path, rows))


def test_sentinel_warns(tmp_path):
    """A repeated -9999 far below the other values gets a warning saying how to mask it."""
    rows = ["a,50,1,1990-06-01,-9999", "a,50,1,1990-06-02,2", "a,50,1,1990-06-03,-9999"]
    with pytest.warns(UserWarning, match=r"column 'v' has 2 values of -9999.*where\(ds\['v'\] != -9999\)"):
        ds = open_dataset(_csv(tmp_path, rows))
    assert np.nanmin(ds.v.values) == -9999  # read as data, as the warning says


def test_sentinel_na_values_and_no_false_alarm(tmp_path):
    """na_values masks the sentinel; values close to -9999 (not a lone extreme) raise no warning."""
    rows = ["a,50,1,1990-06-01,-9999", "a,50,1,1990-06-02,2", "a,50,1,1990-06-03,-9999"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = open_dataset(_csv(tmp_path, rows), na_values=[-9999])
        np.testing.assert_array_equal(ds.v.values[:, 0], [np.nan, 2.0, np.nan])
        open_dataset(_csv(tmp_path, ["a,50,1,1990-06-01,-9999", "a,50,1,1990-06-02,-9998",
                                     "a,50,1,1990-06-03,-9999"], name="deep.csv"))


def test_blank_time_rows_refused(tmp_path):
    """Rows without a time are refused, naming their lines; wholly empty rows are skipped."""
    with pytest.raises(DataFormatError, match=r"1 row\(s\) have no time in column 'time', e.g. lines \[3\]"):
        open_dataset(_csv(tmp_path, ["a,50,1,1990-06-01,1", "a,50,1,,2", "a,50,1,1990-06-03,3"]))
    ds = open_dataset(_csv(tmp_path, ["a,50,1,1990-06-01,1", ",,,,"], name="trailing.csv"))
    assert ds.sizes["time"] == 1


def test_unrecognised_columns_are_named_briefly_with_a_hint_for_wide_and_semicolon_files(tmp_path):
    wide = tmp_path / "wide.csv"
    wide.write_text("time," + ",".join(f"st{i}" for i in range(30)) + "\n1990-06-01," + ",".join(["1"] * 30) + "\n")
    with pytest.raises(DataFormatError, match=r"\['time', 'st0', .*\.\.\. \(31 columns\).*pandas\.melt"):
        open_dataset(wide)
    semi = tmp_path / "semi.csv"
    semi.write_text("station;lat;lon;time;v\na;50;1;1990-06-01;2\n")
    with pytest.raises(DataFormatError, match=r"separated by ';' or tabs.*sep=';'"):
        open_dataset(semi)
    assert float(open_dataset(semi, sep=";").v.values.ravel()[0]) == 2.0  # pandas options reach the reader

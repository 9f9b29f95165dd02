"""Reading dlscale/1 results files.

This is the only module that touches HDF5. It checks that a file really is a
dlscale results file and turns it into plain Python objects (dicts of str/int/
float, numpy arrays), so the rest of the package never sees h5py types.
Files are read with plain serial h5py and closed before returning.
"""

import os
from dataclasses import dataclass

import h5py
import numpy as np

SCHEMA = "dlscale/1"


class ReportError(Exception):
    """A problem with an input file; the CLI prints it as one line and exits 2."""


def decode(value):
    """Turn an h5py attribute value into plain Python.

    h5py returns variable-length strings as str but fixed-length ones as
    bytes (np.bytes_ is a bytes subclass), and numbers as numpy scalars.
    """
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [decode(v) for v in value.tolist()]
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def attrs_dict(obj):
    """All attributes of an h5py object, decoded."""
    return {key: decode(value) for key, value in obj.attrs.items()}


@dataclass
class Case:
    """One benchmark case (/cases/NNNN) loaded into memory."""

    file: str
    name: str                  # "0000", "0001", ...
    attrs: dict
    iter_time_s: object        # float64 [ranks, iterations] or None
    phase_time_s: object       # float64 [ranks, iterations, 4] or None
    loss: object               # float64 [iterations] or None
    memory: object             # structured array [ranks] or None
    summary: object            # dict of the summary group's attrs, or None

    def get(self, key):
        """A required case attribute; a missing one is a malformed file."""
        if key not in self.attrs:
            raise ReportError(f"{self.file}: case {self.name} lacks attribute '{key}'")
        return self.attrs[key]

    @property
    def status(self):
        return str(self.attrs.get("status", "unknown"))

    @property
    def ok(self):
        return self.status == "ok"


@dataclass
class ResultsFile:
    """A whole results file: root attributes, per-rank system info, cases."""

    path: str
    attrs: dict
    ranks: object              # structured array of /system/ranks, or None
    cases: list


def _dataset(group, name, dtype=None):
    """Read a dataset fully, or None when absent (it is optional for failed cases)."""
    obj = group.get(name)
    if not isinstance(obj, h5py.Dataset):
        return None
    data = obj[()]
    return np.asarray(data, dtype=dtype) if dtype is not None else data


def _read_case(path, name, group):
    attrs = attrs_dict(group)
    iter_time = _dataset(group, "iter_time_s", np.float64)
    phase_time = _dataset(group, "phase_time_s", np.float64)
    # Shape checks here so that stats code can rely on the layout.
    if iter_time is not None and iter_time.ndim != 2:
        raise ReportError(f"{path}: case {name}: iter_time_s has shape {iter_time.shape}, "
                          "expected [ranks, iterations]")
    if phase_time is not None and (phase_time.ndim != 3 or phase_time.shape[2] != 4):
        raise ReportError(f"{path}: case {name}: phase_time_s has shape {phase_time.shape}, "
                          "expected [ranks, iterations, 4]")
    summary = group.get("summary")
    return Case(
        file=path,
        name=name,
        attrs=attrs,
        iter_time_s=iter_time,
        phase_time_s=phase_time,
        loss=_dataset(group, "loss", np.float64),
        memory=_dataset(group, "memory"),
        summary=attrs_dict(summary) if isinstance(summary, h5py.Group) else None,
    )


def _open(path):
    """Open a results file read-only after checking it is HDF5 with our schema."""
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ReportError(f"{path}: is a directory, not a results file")
    try:
        if not h5py.is_hdf5(path):
            raise ReportError(f"{path}: not an HDF5 file")
        f = h5py.File(path, "r")
    except OSError as e:
        raise ReportError(f"{path}: cannot be opened as HDF5 ({e})") from e
    schema = f.attrs.get("schema")
    if schema is None:
        f.close()
        raise ReportError(f"{path}: not a dlscale results file (schema attribute missing)")
    schema = decode(schema)
    if schema != SCHEMA:
        f.close()
        raise ReportError(f"{path}: schema {schema!r} is not supported (expected {SCHEMA})")
    return f


def case_name(case):
    """Accept a case as its group name ("0003") or its index (3)."""
    return f"{case:04d}" if isinstance(case, int) else str(case)


def load_results(path, only=None):
    """Load a results file; `only` restricts loading to one case (name or index)."""
    path = os.fspath(path)
    f = _open(path)
    try:
        with f:
            ranks = _dataset(f, "system/ranks")
            cases_group = f.get("cases")
            names = sorted(cases_group.keys()) if isinstance(cases_group, h5py.Group) else []
            if only is not None:
                wanted = case_name(only)
                if wanted not in names:
                    raise ReportError(f"{path}: no case {wanted} (cases: {', '.join(names) or 'none'})")
                names = [wanted]
            cases = [_read_case(path, n, cases_group[n]) for n in names
                     if isinstance(cases_group[n], h5py.Group)]
            return ResultsFile(path=path, attrs=attrs_dict(f), ranks=ranks, cases=cases)
    except (OSError, KeyError, ValueError, TypeError) as e:
        # h5py raises these for truncated or oddly typed content; one line for the user.
        raise ReportError(f"{path}: malformed results file ({e})") from e


def load_case(path, case):
    """Load one case (name "0003" or index 3) of a results file."""
    return load_results(path, only=case).cases[0]

// Whether the HDF5 library makes progress: every checked HDF5 call (DLSCALE_CHECK_H5, io/h5.h)
// notes that it returned. suite/process/read_guard.h ends a read that makes none.
#pragma once

namespace dlscale::h5 {

/// An HDF5 call returned.
void note_progress() noexcept;
/// Seconds since an HDF5 call last returned (or note_progress() was called).
double seconds_since_progress() noexcept;

}  // namespace dlscale::h5

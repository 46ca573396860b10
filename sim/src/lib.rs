//! sim (work in progress).

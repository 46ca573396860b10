//! figures (work in progress).

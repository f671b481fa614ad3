//! Unit tests of the OAuth pieces.

//! Read tools benchmark (being written).
fn main() {}

//! gatewayctl binary.
fn main() {}

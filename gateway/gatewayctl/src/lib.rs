//! gatewayctl: the owner's read-only view of the gateway's sessions and brokers (being written).

//! Provider side of the orc provider protocol.

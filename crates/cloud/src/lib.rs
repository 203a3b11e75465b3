//! Typed async clients for the cloud APIs orc uses.
